"""Labels come from a label service the trainer starts as a process of its own and asks over
TCP on localhost (request, reply). After --stuck-after seconds the service stops answering (it
waits on a backend that never replies), so the trainer blocks in sock.recv for good: a C call,
no Python frame moves, no CPU anywhere in the tree."""

import argparse
import socket
import struct
import subprocess
import sys
import time

import torch
from torch import nn

SERVICE = """
import socket, struct, sys, threading, time
stuck_after = float(sys.argv[1])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
start = time.monotonic()
while True:
    if len(conn.recv(4)) < 4:
        break
    if time.monotonic() - start > stuck_after:
        threading.Event().wait()  # the backend it asks never replies
    conn.sendall(bytes(i % 10 for i in range(256)))
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    service = subprocess.Popen([sys.executable, "-c", SERVICE, str(args.stuck_after)],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    port = int(service.stdout.readline())
    client = socket.create_connection(("127.0.0.1", port))
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512)
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        client.sendall(struct.pack("!I", step))
        reply = b""
        while len(reply) < 256:
            reply += client.recv(256 - len(reply))
        y = torch.tensor(list(reply), dtype=torch.long)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    service.kill()


if __name__ == "__main__":
    main()
