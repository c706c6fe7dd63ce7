"""The values a paper reproduction is checked on, and the config's marks of this suite's choices.

A protocol or a dataset of the config may carry ``choices``: ``key -> short reason`` for every
value its paper does not state or that the suite sets otherwise (the keys are those below;
several keys may share one reason, ``"train.patience, train.checkpoint"``). This module reads
the values those keys name (:func:`protocol_settings`, :func:`dataset_settings`) and gathers a
table's marked choices with their values for its caption (:func:`table_choices`); what the papers
state, and the check that every unstated value is marked, are the report's
(:mod:`bench.report.paper_settings`).
"""

from __future__ import annotations

from typing import Any

#: the ``train`` keys a protocol is checked on; the others change no number a table reports
#: (``amp`` is off in every profile, ``eval_batch_size`` batches evaluation, ``keep_checkpoint``
#: and ``vali_curve_list_size`` only keep or record more) or are a method's (``tau_schedule``)
CHECKED_TRAIN = ("batch_size", "list_size", "test_list_size", "epochs", "max_steps", "lr", "weight_decay", "lr_step",
                 "lr_gamma", "grad_clip", "early_stopping_metric", "patience", "checkpoint", "refit")


def expand_keys(choices: dict[str, str] | None) -> dict[str, str]:
    """``{"a, b": reason}`` -> ``{"a": reason, "b": reason}``.

    >>> expand_keys({"train.patience, train.checkpoint": "no rule given", "seeds": "3 runs"})
    {'train.patience': 'no rule given', 'train.checkpoint': 'no rule given', 'seeds': '3 runs'}
    """
    return {key.strip(): reason for keys, reason in (choices or {}).items() for key in keys.split(",")}


def protocol_settings(config: dict[str, Any], protocol: str, model: dict[str, Any],
                      train: dict[str, Any]) -> dict[str, Any]:
    """The checked keys of a protocol and their values, given its ``model`` and ``train`` on one
    dataset (:func:`bench.config.plan.protocol_for_dataset`): every key of the resolved model, the
    :data:`CHECKED_TRAIN` keys (``lr_gamma`` only with a step decay), ``seeds`` and every key of its
    run-kind sections (SinkProp's own protocol, ``methods`` aside)."""
    from bench.config import kinds
    from bench.config.run import resolve_model, resolve_section, resolve_train

    train = resolve_train(train, None, method=f"protocols.{protocol}")
    out = {f"model.{k}": v for k, v in resolve_model(model, f"protocols.{protocol}.model").items()}
    out.update({f"train.{k}": train[k] for k in CHECKED_TRAIN if k != "lr_gamma" or train["lr_step"] is not None})
    out["seeds"] = list(config["protocols"][protocol]["seeds"])
    for key in kinds.protocol_kinds():
        section = config["protocols"][protocol].get(key)
        if section:
            resolved = resolve_section(key, section, f"protocols.{protocol}.{key}")
            out.update({f"{key}.{k}": v for k, v in resolved.items() if k != "methods"})
    return out


def dataset_settings(config: dict[str, Any], dataset: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The checked preparation options of ``dataset`` (``options.<key>``): ``normalize``;
    ``log1p_columns`` with ``log1p_zscore``; ``clip`` when set; ``vali_fraction`` when the source
    has no validation file; every ``arf_*`` option with the ARF filter; and the ``extra`` keys."""
    from bench.data.prepare import resolve_options
    from bench.data.registry import REGISTRY

    ds = config["datasets"][dataset]
    o = resolve_options(ds.get("options"), ds["source"] == "synthetic")
    keys = ["normalize", *extra]
    if o["normalize"] == "log1p_zscore":
        keys.append("log1p_columns")
    if o["clip"] is not None:
        keys.append("clip")
    entry = REGISTRY.get(ds["source"])
    if entry is not None and not entry.synthetic and "vali" not in entry.splits:
        keys.append("vali_fraction")
    if o["arf_filter"]:
        keys += [k for k in o if k.startswith("arf_")]
    return {f"options.{k}": o[k] for k in dict.fromkeys(keys)}
