"""The gateway's `/metrics` read as a scraper reads it: `scrape` parses the text with
prometheus-client's own parser into `Scraped`, each sample's value by its name and labels."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Scraped:
    text: str
    samples: dict[tuple[str, Labels], float]
    families: dict[str, str]  # each family's name and type

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels (0 when the scrape has none)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include these."""
        wanted = set(labels.items())
        return sum(value for (found, have), value in self.samples.items()
                   if found == name and wanted <= have)


def parse(text: str) -> Scraped:
    samples: dict[tuple[str, Labels], float] = {}
    families: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return Scraped(text, samples, families)


def scrape(http: httpx.Client, token: str | None = None) -> Scraped:
    """GET /metrics (with `token` as the bearer instead of the client's own), parsed."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    answer = http.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(answer.text)
