"""Labels come from a small label server over a socket (request, reply). After --stuck-after
seconds the server thread stops answering (it is alive but waits on something else), so the
main thread blocks in sock.recv for good: a C call, no Python frame moves, no CPU."""

import argparse
import socket
import struct
import threading
import time

import torch
from torch import nn


def label_server(conn, stuck_after):
    start = time.monotonic()
    while True:
        conn.recv(4)
        if time.monotonic() - start > stuck_after:
            threading.Event().wait()  # never replies again
        conn.sendall(bytes(torch.randint(0, 10, (256,)).tolist()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    client, server = socket.socketpair()
    threading.Thread(target=label_server, args=(server, args.stuck_after), daemon=True).start()
    model = nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512)
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        client.sendall(struct.pack("!I", step))
        reply = b""
        while len(reply) < 256:
            reply += client.recv(256 - len(reply))
        y = torch.tensor(list(reply))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1


if __name__ == "__main__":
    main()
