"""Reading a /metrics answer in tests: samples by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

METRICS_TOKEN = "scrape-token-5f0c2d8e41b7a9"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (summed over the rest)."""
    wanted = set(labels.items())
    return sum(value for (sample, labelled), value in samples.items() if sample == name and wanted <= set(labelled))


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(labels)[label] for (sample, labels), _ in samples.items() if sample == name and label in dict(labels)}
