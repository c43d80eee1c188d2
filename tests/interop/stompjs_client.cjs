// @stomp/stompjs over @stomp/tcp-wrapper (npm, Node.js) against vdsmd; see
// README.md.  The packages are looked up under $NPM_PREFIX (build/npm).
'use strict';
const path = require('path');
const { createRequire } = require('module');

const [host, portStr, vm, mode] = process.argv.slice(2);
const prefix = process.env.NPM_PREFIX || path.join(__dirname, '..', '..', 'build', 'npm');
const req = createRequire(path.join(path.resolve(prefix), 'package.json'));
const { Client } = req('@stomp/stompjs');
const { TCPWrapper } = req('@stomp/tcp-wrapper');

const REPLY = 'jms.topic.interop.stompjs';
const TIMEOUT = 10000;
const vmEvent = '|virt|VM_status|' + vm;

function die(msg) {
  process.stderr.write('stompjs_client: ' + msg + '\n');
  process.exit(1);
}

const timer = setTimeout(() => die('timed out (state ' + state + ')'), 3 * TIMEOUT);
let state = 'connecting';
const pending = new Map();   // JSON-RPC id -> resolve

const client = new Client({
  webSocketFactory: () => new TCPWrapper(host, Number(portStr)),
  reconnectDelay: 0,         // one attempt: a failure must fail the test
  connectionTimeout: TIMEOUT,
  // the library's defaults: heart-beat 10000,10000 and accept-version 1.2,1.1,1.0;
  // MODE hb: 1000,1000, and the connection idles 3.5 s before DISCONNECT, so
  // both sides must heart-beat (stompjs drops a silent server after 2 x 1 s)
  ...(mode === 'hb' ? { heartbeatIncoming: 1000, heartbeatOutgoing: 1000 } : {}),
  onStompError: (f) => die('ERROR frame: ' + JSON.stringify(f.headers) + ' ' + f.body),
  onWebSocketClose: () => { if (state !== 'disconnecting') die('socket closed in state ' + state); },
  onWebSocketError: (e) => die('socket error: ' + e),
  onDisconnect: (receipt) => {
    if (receipt.command !== 'RECEIPT') die('DISCONNECT answered by ' + receipt.command);
    console.log('BYE');
  },
  onConnect: (connected) => run(connected).catch((e) => die(String(e && e.stack || e))),
});

function call(id, method, params) {
  const msg = { jsonrpc: '2.0', id, method };
  if (params) msg.params = params;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    client.publish({ destination: 'jms.topic.vdsm_requests', body: JSON.stringify(msg),
                     headers: { 'reply-to': REPLY, 'content-type': 'application/json' } });
  });
}

async function run(connected) {
  if (connected.headers.version !== '1.2') die('version ' + connected.headers.version);
  state = 'connected';
  let eventResolve;
  const eventP = new Promise((r) => { eventResolve = r; });
  client.subscribe(REPLY, (m) => {
    const r = JSON.parse(m.body);
    const resolve = pending.get(r.id);
    if (!resolve) die('unexpected response ' + m.body);
    pending.delete(r.id);
    resolve(r);
  }, { id: 'reply', ack: 'auto' });
  client.subscribe('jms.queue.events', (m) => {
    const ev = JSON.parse(m.body);
    if (ev.method === vmEvent) eventResolve(ev);
  }, { id: 'events', ack: 'auto' });
  console.log('RESP ' + JSON.stringify(await call('ping', 'Host.ping2')));
  console.log('RESP ' + JSON.stringify(await call('stats', 'VM.getStats', { vmID: vm })));
  state = 'ready';
  console.log('READY');
  const ev = await eventP;
  console.log('EVENT ' + JSON.stringify(ev));
  if (mode === 'hb') await new Promise((r) => setTimeout(r, 3500));
  state = 'disconnecting';
  await client.deactivate();  // DISCONNECT with a receipt, then close
  clearTimeout(timer);
}

client.activate();
