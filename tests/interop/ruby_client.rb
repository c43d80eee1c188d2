# ruby-stomp (Debian ruby-stomp, the stomp gem) against vdsmd; see README.md.
require 'json'
require 'stomp'
require 'timeout'

host, port, vm, mode = ARGV[0], ARGV[1].to_i, ARGV[2], ARGV[3]
REPLY = 'jms.topic.interop.ruby'
TIMEOUT = 10
$stdout.sync = true

def die(msg)
  $stderr.puts "ruby_client: #{msg}"
  exit 1
end

# The gem speaks 1.0 unless told otherwise; told, it offers a version list.
conn = Stomp::Connection.new(
  hosts: [{ host: host, port: port, ssl: false }],
  reliable: false,
  connect_timeout: TIMEOUT,
  connect_headers: { 'accept-version' => '1.0,1.1,1.2', 'host' => 'localhost',
                     'heart-beat' => '0,0' })
die("no CONNECTED: #{conn.connection_frame.inspect}") unless conn.open? &&
  conn.connection_frame.command == 'CONNECTED'
die("protocol #{conn.protocol}") unless conn.protocol == '1.2'

conn.subscribe(REPLY, { 'id' => 'reply', 'ack' => 'auto' })
conn.subscribe('jms.queue.events', { 'id' => 'events', 'ack' => 'auto' })

def next_message(conn, sub)
  loop do
    m = Timeout.timeout(TIMEOUT) { conn.receive }
    die('connection closed') if m.nil?
    die("ERROR frame: #{m.headers.inspect} #{m.body}") if m.command == 'ERROR'
    return m if m.command == 'MESSAGE' && m.headers['subscription'] == sub
  end
rescue Timeout::Error
  die("timed out waiting for a MESSAGE on subscription #{sub}")
end

calls = [['ping', 'Host.ping2', nil], ['stats', 'VM.getStats', { 'vmID' => vm }]]
calls.each do |rid, method, params|
  req = { 'jsonrpc' => '2.0', 'id' => rid, 'method' => method }
  req['params'] = params if params
  # the gem adds content-length, and content-type text/plain unless given
  # (MODE noct: left to the gem)
  headers = { 'reply-to' => REPLY }
  headers['content-type'] = 'application/json' unless mode == 'noct'
  conn.publish('jms.topic.vdsm_requests', JSON.generate(req), headers)
  m = next_message(conn, 'reply')
  puts "RESP #{JSON.generate(JSON.parse(m.body))}"
end

puts 'READY'
want = "|virt|VM_status|#{vm}"
ev = nil
loop do
  ev = JSON.parse(next_message(conn, 'events').body)
  break if ev['method'] == want
end
puts "EVENT #{JSON.generate(ev)}"
conn.disconnect({ 'receipt' => 'bye' })
r = conn.disconnect_receipt
die("no RECEIPT for DISCONNECT: #{r.inspect}") unless r && r.command == 'RECEIPT' &&
                                                      r.headers['receipt-id'] == 'bye'
puts 'BYE'
