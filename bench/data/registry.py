"""What each dataset is: the facts of ``docs/datasets.md`` as data.

A :class:`Dataset` says where the archive comes from (or that it is manual-only and where
to get it), its name, byte size and checksum, its format, where each split of each fold
lives inside it, and what the parsed arrays must look like. Storage on disk::

    <raw_dir>/<group>/<archive>            the verified archive (datasets sharing one
                                           archive, e.g. yahoo-set1/2, share a group)
    <raw_dir>/<group>/extracted/           the extracted tree (+ .manifest.json with the
                                           sha256 of every file); a tree extracted by hand
                                           there is used as is

That the archive was verified is recorded in the suite's checksum cache
(:mod:`bench.data.checksum_cache`, default ``results/cache/source-sha256``), not under
``raw_dir``, which may be the user's own folder.

Split files are located by *patterns*: a pattern is a relative path (``{fold}`` substituted)
whose components are matched, case-insensitively and with shell wildcards, against the last
components of the extracted file paths, so ``Fold1/train.txt`` finds
``MSLR-WEB30K/Fold1/train.txt`` and ``*2003_td*/Fold1/train*.txt`` finds LETOR 3.0's
``.../2003_td_dataset/Fold1/trainingset.txt``. ``prefer`` breaks ties between several
matching files (``QueryLevelNorm`` over ``Feature_null`` copies for LETOR 3.0).

Datasets with a single split layout expose one fold named ``Fold1``. A dataset without a
validation file (Istella full) carves one from train in ``prepare``.

Tests and mirrors override entries with :func:`load_registry` (a JSON file whose objects
replace or extend built-in entries field by field) or :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import ConfigError, UsageError

__all__ = ["Dataset", "REGISTRY", "get", "load_registry", "names"]

SPLITS = ("train", "vali", "test")
_FOLDS5 = tuple(f"Fold{k}" for k in range(1, 6))


@dataclass(frozen=True)
class Dataset:
    """One dataset of the registry (see the module docstring for the storage layout)."""

    name: str
    title: str
    n_features: int | None
    label_range: tuple[float, float] | None
    licence: str
    homepage: str
    urls: tuple[str, ...] = ()
    archive: str | None = None
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None
    archive_format: str | None = None  # zip | tar.gz | tar.bz2 | rar; nested via inner_archives
    inner_archives: tuple[str, ...] = ()
    manual: bool = False
    group: str | None = None  # raw-dir folder; defaults to the name
    folds: tuple[str, ...] = ("Fold1",)
    splits: dict[str, tuple[str, ...]] = field(default_factory=dict)  # split -> patterns
    prefer: tuple[str, ...] = ()
    file_sha256: dict[str, str] = field(default_factory=dict)  # extracted relpath -> sha256
    synthetic: bool = False
    notes: str = ""
    # fold -> split -> (queries, documents) as published with the dataset (docs/datasets.md, "The datasets");
    # what cost projections use before a fold is prepared (bench.data.shapes)
    split_sizes: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # the evaluation convention of the dataset's community (bench.metrics.CONVENTIONS):
    # LETOR 3.0 sets are graded by Eval-Score-3.0.pl, LETOR 4.0 sets by Eval-Score-4.0.pl,
    # the others the LightGBM way ("default")
    convention: str = "default"
    # a requirement ("package==version") whose source distribution on PyPI is the archive:
    # fetched with pip from the registry (bench.data.fetch.pip_download), verified like a download
    pip: str | None = None
    # the split files are the first lines of larger files: the last query of each may be cut
    # short, so prepare drops it (bench.data.prepare)
    last_query_cut: bool = False

    @property
    def raw_group(self) -> str:
        return self.group or self.name

    @property
    def scripted(self) -> bool:
        return (bool(self.urls) or self.pip is not None) and not self.manual

    def split_patterns(self, fold: str, split: str) -> tuple[str, ...]:
        return tuple(p.format(fold=fold) for p in self.splits.get(split, ()))

    def canonical_fold(self, fold: str) -> str:
        """The registry spelling of ``fold`` (case-insensitive); an unknown fold is a
        :class:`UsageError` listing the folds (one line from ``ltr-bench prepare``)."""
        for f in self.folds:
            if f.lower() == str(fold).lower():
                return f
        raise UsageError(f"dataset {self.name!r} has no fold {fold!r}; folds: {', '.join(self.folds)}")


def _std(train: str, vali: str | None, test: str) -> dict[str, tuple[str, ...]]:
    out = {"train": (train,), "test": (test,)}
    if vali is not None:
        out["vali"] = (vali,)
    return out


_MSLR = dict(folds=_FOLDS5, splits=_std("{fold}/train.txt", "{fold}/vali.txt", "{fold}/test.txt"),
             n_features=136, label_range=(0.0, 4.0), archive_format="zip",
             licence="Microsoft Research Licence Agreement (MSR-LA), research use",
             homepage="https://www.microsoft.com/en-us/research/project/mslr/")
_LETOR3_SPLITS = {"train": ("{fold}/train*.txt",), "vali": ("{fold}/vali*.txt",),
                  "test": ("{fold}/test*.txt",)}
_LETOR3_HOME = "https://www.microsoft.com/en-us/research/project/letor-learning-rank-information-retrieval/"


def _letor3(name: str, collection_dir: str, n_features: int, labels: tuple[float, float],
            archive: str, group: str) -> Dataset:
    return Dataset(
        name=name, title=f"LETOR 3.0 {name.upper()}", n_features=n_features, label_range=labels,
        licence="LETOR 3.0 terms (research use; see the LETOR page)", homepage=_LETOR3_HOME,
        archive=archive, archive_format="rar", manual=True, group=group, folds=_FOLDS5,
        splits={s: tuple(f"{collection_dir}/{p}" for p in pats) for s, pats in _LETOR3_SPLITS.items()}
        if collection_dir else _LETOR3_SPLITS,
        prefer=("querylevelnorm",), convention="letor3",
        notes="Feature_null copies write the string NULL (see null_value).")


_BUILTIN = [
    Dataset(name="mslr-web10k", title="MSLR-WEB10K",
            urls=("https://api.onedrive.com/v1.0/shares/s!AtsMfWUz5l8nbOIoJ6Ks0bEMp78/root/content",),
            archive="MSLR-WEB10K.zip", size=1_234_144_912,
            sha256="2902142ea33f18c59414f654212de5063033b707d5c3939556124b1120d3a0ba",
            file_sha256={
                "Fold1/train.txt": "6eb3fae4e1186e1242a6520f53a98abdbcde5b926dd19a28e51239284b1d55dc",
                "Fold1/vali.txt": "e86fb3fe7e8a5f16479da7ce04f783ae85735f17f66016786c3ffc797dd9d4db",
                "Fold1/test.txt": "33fe002374a4fce58c4e12863e4eee74745d5672a26f3e4ddacc20ccfe7d6ba0"},
            **_MSLR),
    Dataset(name="mslr-web30k", title="MSLR-WEB30K",
            urls=("https://api.onedrive.com/v1.0/shares/s!AtsMfWUz5l8nbXGPBlwD1rnFdBY/root/content",),
            archive="MSLR-WEB30K.zip", size=3_849_406_307,
            sha256="08cb7977e1d5cbdeb57a9a2537a0923dbca6d46a76db9a6afc69e043c85341ae",
            file_sha256={
                "Fold1/train.txt": "40b8eee4d1221cf8205e81603441c1757dd024a3baac25a47756210b03c031d6",
                "Fold1/vali.txt": "7647834b84c849a61e5cf3c999a2f72a4785613286fd972a5615e9fcb58f94d8",
                "Fold1/test.txt": "9a4668fd2615e6772d2e5c4d558d084b2daaf2405571eaf3e4d0526f4da096c7"},
            split_sizes={"Fold1": {"train": (18_919, 2_270_296), "vali": (6_306, 747_218),
                                   "test": (6_306, 753_611)}},
            **_MSLR),
    # The first 5,000 lines of MSLR-WEB30K Fold1's train.txt and test.txt, as rankeval's test data
    # (43 queries each, the last of each possibly cut, so dropped; no validation file, so carved)
    Dataset(name="mslr-web30k-sample", title="MSLR-WEB30K Fold1, first 5,000 lines (rankeval 0.8.2's test data)",
            pip="rankeval==0.8.2", archive="rankeval-0.8.2.tar.gz", size=2_288_837,
            sha256="c7d71602ab7fe0a0281976c1f0e883cb16431f72e4e946e5fd83790449bb21a9", archive_format="tar.gz",
            splits=_std("rankeval/test/data/msn1.fold1.train.5k.txt", None, "rankeval/test/data/msn1.fold1.test.5k.txt"),
            file_sha256={
                "rankeval/test/data/msn1.fold1.train.5k.txt":
                    "6d1721de961a35fbaef7085dc5b41e2940f0ddb04bab5f7a8566cf7db4158fa6",
                "rankeval/test/data/msn1.fold1.test.5k.txt":
                    "13d3c638edd23e482c38f4316c2680c938c2eaedbe096970ab30a48e364463d3"},
            n_features=136, label_range=(0.0, 4.0), last_query_cut=True,
            licence="MSLR-WEB30K's Microsoft Research Licence Agreement (MSR-LA), research use; "
                    "shipped in the rankeval package's source distribution (LGPL-2.1)",
            homepage="https://pypi.org/project/rankeval/0.8.2/",
            notes="A sample for end-to-end runs, too small for statistics: drops each file's last query "
                  "(possibly cut at line 5,000) and carves validation from train (vali_fraction)."),
    Dataset(name="istella", title="Istella LETOR (full)",
            urls=("http://library.istella.it/dataset/istella-letor.tar.gz",),
            archive="istella-letor.tar.gz", size=1_288_401_248,
            sha256="d45899d9a6a0e48afb250aac7ee3dc50e73e263687f15761d754515cd8284e0b",
            archive_format="tar.gz", splits=_std("full/train.txt", None, "full/test.txt"),
            file_sha256={
                "full/train.txt": "8b08ca4c36281e408bfa026303461a6162398a1eec22fb79db0709c76bf6d189",
                "full/test.txt": "4b34523af8e030718f0216bcae0a35caee1e34e5198ff3e76c08a75db61aac65"},
            split_sizes={"Fold1": {"train": (23_219, 7_325_625), "test": (9_799, 3_129_004)}},
            n_features=220, label_range=(0.0, 4.0),
            licence="Istella LETOR licence, non-commercial research use",
            homepage="https://istella.ai/data/letor-dataset/",
            notes="No validation file: prepare carves vali_fraction of train queries (60/20/20). "
                  "Values up to 1.79769313486e+308 (DBL_MAX): see the clip option."),
    Dataset(name="istella-s", title="Istella-S LETOR",
            urls=("http://library.istella.it/dataset/istella-s-letor.tar.gz",),
            archive="istella-s-letor.tar.gz", size=472_129_615,
            sha256="41b21116a3650cc043dbe16f02ee39f4467f9405b37fdbcc9a6a05e230a38981",
            archive_format="tar.gz",
            splits=_std("sample/train.txt", "sample/vali.txt", "sample/test.txt"),
            file_sha256={
                "sample/train.txt": "5cda4187b88b597ca6fa98d6cd3a6d7551ba69ffff700eae63a59fbc8af385b8",
                "sample/vali.txt": "f225dd95772fa65dc685351ff2643945fbd9a9c0e874aa1c538d485595e7c890",
                "sample/test.txt": "2cd1a4f46fa21ea2489073979b5e5913146d1e451f1d6e268bc4e472d39da5d7"},
            n_features=220, label_range=(0.0, 4.0),
            licence="Istella LETOR licence, non-commercial research use",
            homepage="https://istella.ai/data/letor-dataset/"),
    *[Dataset(name=f"yahoo-set{k}", title=f"Yahoo! LTR Challenge Set {k}",
              archive="dataset.tgz", archive_format="tar.gz", inner_archives=("ltrc_yahoo.tar.bz2",),
              manual=True, group="yahoo",
              splits=_std(f"set{k}.train.txt", f"set{k}.valid.txt", f"set{k}.test.txt"),
              n_features=700, label_range=(0.0, 4.0),
              split_sizes={"Fold1": {"train": (19_944, 473_134), "vali": (2_994, 71_083),
                                     "test": (6_983, 165_660)}} if k == 1 else {},
              licence="Yahoo! Webscope C14 licence (click-through, research use)",
              homepage="https://webscope.sandbox.yahoo.com/catalog.php?datatype=c",
              notes="Sparse; dataset.tgz holds ltrc_yahoo.tar.bz2.")
      for k in (1, 2)],
    *[Dataset(name=f"mq{year}", title=f"LETOR 4.0 MQ{year}", archive=f"MQ{year}.rar",
              archive_format="rar", manual=True,
              md5="7be1640ae95c6408dab0ae7207bdc706" if year == 2007 else None,
              folds=_FOLDS5,
              splits=_std(f"MQ{year}/{{fold}}/train.txt", f"MQ{year}/{{fold}}/vali.txt",
                          f"MQ{year}/{{fold}}/test.txt"),
              n_features=46, label_range=(0.0, 2.0),
              licence="LETOR 4.0 terms (research use; licence page)",
              homepage="https://www.microsoft.com/en-us/research/project/letor-learning-rank-information-retrieval/letor-4-0/",
              convention="letor4",
              notes="Already query-normalised; '# docid = ...' comments.")
      for year in (2007, 2008)],
    _letor3("ohsumed", "", 45, (0.0, 2.0), "OHSUMED.rar", "letor3-ohsumed"),
    *[_letor3(n, f"*{n[2:]}_{n[:2]}*", 64, (0.0, 1.0), "Gov.rar", "letor3-gov")
      for n in ("td2003", "td2004", "hp2003", "hp2004", "np2003", "np2004")],
    Dataset(name="synthetic", title="Synthetic (PiRank Appendix E), generated locally",
            n_features=None, label_range=None, licence="generated; no licence needed",
            homepage="local", synthetic=True, folds=_FOLDS5,
            notes="Any fold name is accepted; the generator parameters come from --options."),
]

REGISTRY: dict[str, Dataset] = {d.name: d for d in _BUILTIN}


def _coerce(fields: dict) -> dict:
    out = dict(fields)
    for key in ("urls", "folds", "prefer", "inner_archives"):
        if key in out and out[key] is not None:
            out[key] = tuple([out[key]] if isinstance(out[key], str) else out[key])
    if out.get("label_range") is not None:
        out["label_range"] = tuple(float(v) for v in out["label_range"])
    if "split_sizes" in out:
        out["split_sizes"] = {f: {s: tuple(v) for s, v in sizes.items()} for f, sizes in out["split_sizes"].items()}
    if "splits" in out:
        out["splits"] = {k: tuple([v] if isinstance(v, str) else v) for k, v in out["splits"].items()}
    return out


def load_registry(path: str | os.PathLike | None = None,
                  base: dict[str, Dataset] | None = None) -> dict[str, Dataset]:
    """The built-in registry with the entries of the JSON file ``path`` applied on top; a bad
    file is :class:`bench.errors.ConfigError` (a ``ValueError``) naming it and the entry.

    The file holds ``{name: {field: value, ...}, ...}``; a known name is updated field by field
    (e.g. only ``urls``, ``size`` and ``sha256`` for a mirror), a new name must give all
    required fields (``title``, ``n_features``, ``label_range``, ``licence``, ``homepage``).
    """
    reg = dict(REGISTRY if base is None else base)
    if path is None:
        return reg
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read registry override: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: registry override must be a JSON object of name -> fields")
    known = {f.name for f in dataclasses.fields(Dataset)}
    for name, fields in data.items():
        if not isinstance(fields, dict):
            raise ConfigError(f"{path}: entry {name!r} must be an object")
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ConfigError(f"{path}: entry {name!r}: unknown field(s) {unknown}; known: {sorted(known)}")
        fields = _coerce(fields)
        try:
            reg[name] = (dataclasses.replace(reg[name], **fields) if name in reg
                         else Dataset(name=name, **{k: v for k, v in fields.items() if k != "name"}))
        except TypeError as exc:
            raise ConfigError(f"{path}: entry {name!r}: {exc}") from exc
    return reg


def get(name: str, registry: dict[str, Dataset] | None = None) -> Dataset:
    """The registry entry ``name``; unknown names fail with the list of known ones."""
    reg = REGISTRY if registry is None else registry
    if name not in reg:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(reg))}")
    return reg[name]


def names(registry: dict[str, Dataset] | None = None) -> list[str]:
    """Names of all registered datasets, in registry order."""
    return list(REGISTRY if registry is None else registry)
