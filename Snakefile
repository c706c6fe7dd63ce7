# ltr-bench: the whole study as one DAG. Rules live in workflows/, one file per stage:
# data -> train / gbdt / linear (one rule per run kind's rule, workflows/train.smk) -> evaluate -> stats -> tables; figures, perf, compare (+ freeze), report.
# The embedded default profile is config/default.yaml; `--configfile config/paper.yaml` is
# merged over it (see docs/configuration.md).
configfile: "config/default.yaml"


include: "workflows/common.smk"
include: "workflows/cluster.smk"
include: "workflows/data.smk"
include: "workflows/train.smk"
include: "workflows/select.smk"
include: "workflows/tune.smk"
include: "workflows/evaluate.smk"
include: "workflows/stats.smk"
include: "workflows/tables.smk"
include: "workflows/figures.smk"
include: "workflows/perf.smk"
include: "workflows/compare.smk"
include: "workflows/report.smk"
include: "workflows/lifecycle.smk"


rule all:
    input:
        report_inputs(),
        plan.report_file(config),
        reproduction_outputs(),  # the frozen baselines, re-run by this study, checked
    default_target: True


sign_rule_functions()  # after the last rule (workflows/common.smk)
