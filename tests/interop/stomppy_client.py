"""stomp.py (Debian python3-stomp) against vdsmd; see README.md."""

import json
import queue
import sys
import threading

import stomp

host, port, vm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mode = sys.argv[4] if len(sys.argv) > 4 else "default"
REPLY = "jms.topic.interop.stomppy"
TIMEOUT = 10


def die(msg):
    print("stomppy_client: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.q = queue.Queue()
        self.receipts = []
        self.disconnected = threading.Event()

    def on_receipt(self, frame):
        self.receipts.append(frame.headers.get("receipt-id"))

    def on_disconnected(self):
        self.disconnected.set()

    def on_message(self, frame):
        self.q.put(frame)

    def on_error(self, frame):
        self.q.put(frame)


def next_message(lst, sub):
    while True:
        try:
            f = lst.q.get(timeout=TIMEOUT)
        except queue.Empty:
            die("timed out waiting for a MESSAGE on subscription %s" % sub)
        if f.cmd == "ERROR":
            die("ERROR frame: %r %r" % (f.headers, f.body))
        if f.headers.get("subscription") == sub:
            return f


# auto_content_length=False: stomp.py then sends SEND without content-length
conn = stomp.Connection12([(host, port)], heartbeats=(0, 0),
                          auto_content_length=(mode != "nocl"))
lst = Listener()
conn.set_listener("interop", lst)
conn.connect(wait=True)
if not conn.is_connected():
    die("not connected")
conn.subscribe(destination=REPLY, id="reply", ack="auto")
conn.subscribe(destination="jms.queue.events", id="events", ack="auto")

calls = [("ping", "Host.ping2", None), ("stats", "VM.getStats", {"vmID": vm})]
for rid, method, params in calls:
    req = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        req["params"] = params
    conn.send(destination="jms.topic.vdsm_requests", body=json.dumps(req),
              content_type="application/json", headers={"reply-to": REPLY})
    f = next_message(lst, "reply")
    print("RESP " + json.dumps(json.loads(f.body)), flush=True)

print("READY", flush=True)
want = "|virt|VM_status|" + vm
while True:
    ev = json.loads(next_message(lst, "events").body)
    if ev.get("method") == want:
        break
print("EVENT " + json.dumps(ev), flush=True)
# stomp.py sends DISCONNECT with a receipt of its own and drops the socket
# when that RECEIPT arrives
conn.disconnect()
if not lst.disconnected.wait(TIMEOUT):
    die("no disconnect after DISCONNECT")
if len(lst.receipts) != 1:
    die("receipts %r" % lst.receipts)
print("BYE", flush=True)
