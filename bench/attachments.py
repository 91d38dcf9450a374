"""What a 5 MB image costs a message, and what ten of them arriving at once cost the gateway.

Against a real `hearth gateway` subprocess (tests.gateway.Gateway) answered by the scripted
model, on its own SQLite home:
- admission alone: `POST …/messages` with text, p50 and p99;
- with an image: the upload (`POST …/attachments`, 5 MB of PNG that does not compress) then
  the message naming it, p50 and p99 of the two together, and of the upload alone;
- ten such uploads at once: the gateway's peak resident memory over them (Linux's VmHWM,
  reset before through /proc/PID/clear_refs), against its resident memory before. An upload
  is streamed to disk as it arrives, so the peak should stay far below ten images' size.

A benchmark, not a test: it prints figures and ratios and exits 0 whatever they are.

    .venv/bin/python bench/attachments.py [--messages 40] [--images 12] [--at-once 10]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from PIL import Image  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway, write_config  # noqa: E402

IMAGE_BYTES = 5 * 1024 * 1024


def noise_png() -> bytes:
    """A PNG of about 5 MB: random pixels, which PNG cannot compress."""
    side = int((IMAGE_BYTES / 3) ** 0.5)
    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=0)
    return out.getvalue()


def ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(samples):7.2f} ms   p99 {p99:7.2f} ms"


def text_alone(api: Api, key: str, count: int) -> list[float]:
    took = []
    for n in range(count):
        began = time.perf_counter()
        answer = api.http.post(f"/api/sessions/{key}/messages", json={"text": f"note {n}"})
        took.append(ms(began))
        assert answer.status_code == 202, answer.text
        api.wait(answer.json()["run_id"])
    return took


def with_image(api: Api, key: str, image: bytes, count: int) -> tuple[list[float], list[float]]:
    whole, uploads = [], []
    for n in range(count):
        began = time.perf_counter()
        made = api.http.post(f"/api/sessions/{key}/attachments", params={"name": f"{n}.png"},
                             content=image)
        uploads.append(ms(began))
        assert made.status_code == 201, made.text
        answer = api.http.post(f"/api/sessions/{key}/messages",
                               json={"text": "look", "attachments": [made.json()["id"]]})
        whole.append(ms(began))
        assert answer.status_code == 202, answer.text
        api.wait(answer.json()["run_id"])
    return whole, uploads


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def at_once(gateway: Gateway, key: str, image: bytes, count: int) -> tuple[int, int, float]:
    """(RSS before, peak RSS during, seconds) for `count` uploads sent together."""
    assert gateway.proc is not None
    pid = gateway.proc.pid
    before = status_kib(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    apis = [gateway.client() for _ in range(count)]

    def one(api: Api, n: int) -> None:
        made = api.http.post(f"/api/sessions/{key}/attachments",
                             params={"name": f"many-{n}.png"}, content=image)
        assert made.status_code == 201, made.text

    threads = [threading.Thread(target=one, args=(api, n)) for n, api in enumerate(apis)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return before, status_kib(pid, "VmHWM"), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--at-once", type=int, default=10)
    args = parser.parse_args()
    image = noise_png()
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}; "
          f"image {len(image) / 1048576:.1f} MB")
    with ScriptedModelServer() as model, tempfile.TemporaryDirectory() as folder:
        model.default = Reply(text="Seen.")
        model.keep_requests = False
        home = Path(folder) / "home"
        write_config(home, model.openai_base_url)
        gateway = Gateway(home).start()
        try:
            api = gateway.client()
            key = api.new_chat()
            text_alone(api, key, 3)  # warm
            text = text_alone(api, key, args.messages)
            whole, uploads = with_image(api, key, image, args.images)
            before, peak, seconds = at_once(gateway, key, image, args.at_once)
        finally:
            gateway.stop()
    print(f"admission, text alone ({len(text)}):        {summary(text)}")
    print(f"upload of the image alone ({len(uploads)}):  {summary(uploads)}")
    print(f"upload + message naming it ({len(whole)}): {summary(whole)}   "
          f"{statistics.median(whole) / statistics.median(text):.1f}x text alone")
    arrived = args.at_once * len(image) / 1048576
    print(f"{args.at_once} uploads at once ({arrived:.0f} MB) in {seconds:.2f} s: gateway RSS "
          f"{before / 1024:.1f} MiB before, peak {peak / 1024:.1f} MiB "
          f"(+{(peak - before) / 1024:.1f} MiB, {(peak - before) / 1024 / arrived:.2f} MiB "
          "per MiB arriving)")


if __name__ == "__main__":
    main()
