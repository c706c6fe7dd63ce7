# Frozen baselines and comparing a new loss against them.
#   snakemake --cores 2 freeze      explicit refresh of results/frozen/<profile>/<dataset>/
#   snakemake --cores 2 compare     train only compare.losses under the frozen protocol and
#                                   render reports/compare/<dataset>.md against every baseline
#                                   (and every loss compared before: the ledger)
#   snakemake --cores 2 all         also checks that its runs of the frozen methods reproduce
#                                   the frozen files (check_reproduced; fails naming the re-freeze)
# The frozen files are params (never inputs): no target other than `freeze` can rewrite them.


rule freeze_dataset:
    input:
        per_query=lambda w: evaluated_files("freeze", [w.dataset]),
        prepared=lambda w: prepared_folds(w.dataset),
        tuning=lambda w: _planned(plan.tuning_records)("freeze", w.dataset),
    output:
        manifest="results/frozen/{profile}/{dataset}/manifest.json",
    params:
        protocol=lambda w: study_protocol_json(w.dataset),
        out_dir=lambda w, output: os.path.dirname(output.manifest),
        threads=config["threads"],
        kernels=determinism.env_assignments(),
    log:
        "results/logs/freeze/{profile}/{dataset}.log",
    group: cluster_group("freeze_dataset")
    resources:
        **cluster_resources("freeze_dataset"),
    conda:
        "../environment.yml"
    shell:
        "{params.kernels} ltr-bench freeze --per-query {input.per_query} --prepared {input.prepared} --protocol {params.protocol:q} "
        "--profile {wildcards.profile} --dataset {wildcards.dataset} --out {params.out_dir} --threads {params.threads} "
        "--tuning {input.tuning} > {log} 2>&1"


rule check_frozen:
    input:
        prepared=lambda w: prepared_folds(w.dataset),
    output:
        plan.FROZEN_CHECKED,
    params:
        frozen=lambda w: plan.frozen_dir(config, w.dataset),
        protocol=lambda w: study_protocol_json(w.dataset),
    log:
        "results/logs/compare/{dataset}/check_frozen.log",
    group: cluster_group("check_frozen")
    resources:
        **cluster_resources("check_frozen"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench check-frozen --frozen {params.frozen} --protocol {params.protocol:q} "
        "--prepared {input.prepared} --out {output} 2>&1 | tee {log}"


rule check_reproduced:
    input:
        per_query=lambda w: evaluated_files("freeze", [w.dataset]),
        prepared=lambda w: prepared_folds(w.dataset),
    output:
        plan.REPRODUCED,
    params:
        frozen=lambda w: plan.frozen_dir(config, w.dataset),
        protocol=lambda w: study_protocol_json(w.dataset),
        tolerance=lambda w: _sorted_json(config["freeze"]["platform_tolerance"]),
        threads=config["threads"],
        kernels=determinism.env_assignments(),
    log:
        "results/logs/compare/{dataset}/reproduced.log",
    group: cluster_group("check_reproduced")
    resources:
        **cluster_resources("check_reproduced"),
    conda:
        "../environment.yml"
    shell:
        "{params.kernels} ltr-bench check-reproduced --frozen {params.frozen} --per-query {input.per_query} --prepared {input.prepared} "
        "--protocol {params.protocol:q} --tolerance {params.tolerance:q} --threads {params.threads} --out {output} "
        "2>&1 | tee {log}"


rule compare_table:
    input:
        new=lambda w: evaluated_files(plan.COMPARE_EXPERIMENT, [w.dataset]),
        prepared=lambda w: prepared_folds(w.dataset),
        checked=plan.FROZEN_CHECKED,
        # the tuned new losses' records: the page states each side's budget (bench.config.tuning)
        tuning=lambda w: _planned(plan.tuning_records)(plan.COMPARE_EXPERIMENT, w.dataset),
    output:
        md=report("reports/compare/{dataset}.md", caption="report/compare.rst", category="Compare"),
        html="reports/compare/{dataset}.html",
        stats="results/stats/compare/{dataset}.parquet",
    params:
        frozen=lambda w: plan.frozen_dir(config, w.dataset),
        spec=compare_spec_json,
        ledger=lambda w: f"results/compare/{w.dataset}/losses",
        # read when the default study has written it; never an input (that would train every baseline)
        reproduced=lambda w: plan.REPRODUCED.format(dataset=w.dataset),
        # its platform facts are compared with the manifest's, which the pinned freeze recorded
        kernels=determinism.env_assignments(),
    log:
        "results/logs/compare/{dataset}/table.log",
    group: cluster_group("compare_table")
    resources:
        **cluster_resources("compare_table"),
    conda:
        "../environment.yml"
    shell:
        "{params.kernels} ltr-bench compare-table --frozen {params.frozen} --new {input.new} --prepared {input.prepared} "
        "--spec {params.spec:q} --ledger {params.ledger} --reproduced {params.reproduced} --stats-out {output.stats} "
        "--tuning {input.tuning} --md {output.md} --html {output.html} 2>&1 | tee {log}"


rule freeze:
    input:
        lambda w: freeze_outputs(),


rule compare:
    input:
        lambda w: compare_outputs(),
