# Net::Stomp (Debian libnet-stomp-perl) against vdsmd; see README.md.
use strict;
use warnings;
use JSON::PP;
use Net::Stomp;

my ($host, $port, $vm, $mode) = @ARGV;
$mode //= 'default';
my $REPLY = 'jms.topic.interop.perl';
my $TIMEOUT = 10;
my $json = JSON::PP->new->canonical;
$| = 1;

sub die_msg { print STDERR "perl_client: $_[0]\n"; exit 1; }

my $stomp = Net::Stomp->new({ hostname => $host, port => $port,
                              reconnect_on_fork => 0 })
    or die_msg('cannot connect');
my $f = $stomp->connect({ 'accept-version' => '1.2', host => 'localhost',
                          login => 'guest', passcode => 'guest' });
die_msg('no CONNECTED: ' . ($f ? $f->command : 'nothing'))
    unless $f && $f->command eq 'CONNECTED';
die_msg('version ' . ($f->headers->{version} // '')) unless ($f->headers->{version} // '') eq '1.2';

$stomp->subscribe({ destination => $REPLY, id => 'reply', ack => 'auto' });
$stomp->subscribe({ destination => 'jms.queue.events', id => 'events', ack => 'auto' });

sub next_message {
    my ($sub) = @_;
    while (1) {
        my $m = $stomp->receive_frame({ timeout => $TIMEOUT });
        die_msg("timed out waiting for a MESSAGE on subscription $sub") unless $m;
        die_msg('ERROR frame: ' . ($m->headers->{message} // '') . ' ' . ($m->body // ''))
            if $m->command eq 'ERROR';
        return $m if $m->command eq 'MESSAGE' && ($m->headers->{subscription} // '') eq $sub;
    }
}

my @calls = (['ping', 'Host.ping2', undef], ['stats', 'VM.getStats', { vmID => $vm }]);
for my $c (@calls) {
    my ($rid, $method, $params) = @$c;
    my %req = (jsonrpc => '2.0', id => $rid, method => $method);
    $req{params} = $params if $params;
    my %h = (destination => 'jms.topic.vdsm_requests', 'reply-to' => $REPLY,
             body => $json->encode(\%req));
    # Net::Stomp sends SEND without content-length unless bytes_message is set
    $h{bytes_message} = 1 if $mode eq 'cl';
    $stomp->send(\%h) or die_msg('send failed');
    my $m = next_message('reply');
    print 'RESP ' . $json->encode($json->decode($m->body)) . "\n";
}

print "READY\n";
my $want = "|virt|VM_status|$vm";
my $ev;
while (1) {
    $ev = $json->decode(next_message('events')->body);
    last if ($ev->{method} // '') eq $want;
}
print 'EVENT ' . $json->encode($ev) . "\n";
# Net::Stomp sends DISCONNECT without a receipt and closes its socket
$stomp->disconnect;
print "BYE\n";
