"""A retrieval-augmented loop: each step fetches neighbour embeddings for its batch from an
embedding server the trainer started (a process of its own, listening on a Unix socket in a
private temporary folder; the request is the step number, the reply 128 float32s per item).
After --stuck-after seconds the server's index reload hangs, so it stops answering and the
trainer blocks in sock.recv for good: a C call, nothing moves, no CPU anywhere in the tree."""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

BATCH = 32
DIM = 128
SERVER = """
import os, socket, sys, threading, time
path, stuck_after, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(1)
print("ready", flush=True)
conn, _ = srv.accept()
start, reply = time.monotonic(), os.urandom(size)
while len(conn.recv(8)) == 8:
    if time.monotonic() - start > stuck_after:
        threading.Event().wait()  # the index reload never finishes
    conn.sendall(reply)
"""


def recv_exact(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise ConnectionError("the embedding server closed the connection")
        got += chunk
    return bytes(got)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    folder = tempfile.mkdtemp(prefix="embed-")
    path = os.path.join(folder, "embed.sock")
    size = BATCH * DIM * 4
    server = subprocess.Popen([sys.executable, "-c", SERVER, path, str(args.stuck_after),
                               str(size)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    server.stdout.readline()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    model = nn.Sequential(nn.Linear(2 * DIM, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(BATCH, DIM)
    y = torch.randint(0, 10, (BATCH,))
    end, step = time.monotonic() + args.seconds, 0
    try:
        while time.monotonic() < end:
            client.sendall(step.to_bytes(8, "little"))
            raw = bytearray(recv_exact(client, size))
            neighbours = torch.frombuffer(raw, dtype=torch.float32).view(BATCH, DIM)
            neighbours = torch.nan_to_num(neighbours).clamp(-1, 1)
            loss = nn.functional.cross_entropy(model(torch.cat([x, neighbours], 1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    finally:
        server.kill()
        os.unlink(path)
        os.rmdir(folder)


if __name__ == "__main__":
    main()
