"""A loader starved by CPU transforms with num_workers=0: the GPU waits for each batch
(data-input)."""

import torch
from _common import setup, train

args, device, cuda = setup(__doc__)
side = 160 if cuda else 48


class Augmented(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int):
        img = torch.rand(3, side, side)
        for _ in range(4):  # the transforms a user leaves in the main process
            img = torch.nn.functional.avg_pool2d(img[None], 3, 1, 1)[0]
            img = torch.fft.ifft2(torch.fft.fft2(img)).real
        return img, i % 10


loader = iter(torch.utils.data.DataLoader(Augmented(), batch_size=32, num_workers=0))
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * side * side, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step() -> None:
    x, y = next(loader)
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


train(args, step)
