# Frozen baselines and comparing a new loss against them.
#   snakemake --cores 2 freeze      explicit refresh of results/frozen/<profile>/<dataset>/
#   snakemake --cores 2 compare     train only compare.losses under the frozen protocol and
#                                   render reports/compare/<dataset>.md against every baseline
# The frozen files are params (never inputs): no target other than `freeze` can rewrite them.


rule freeze_dataset:
    input:
        per_query=lambda w: evaluated_files("freeze", [w.dataset]),
        prepared=lambda w: prepared_folds(w.dataset),
    output:
        manifest="results/frozen/{profile}/{dataset}/manifest.json",
    params:
        protocol=lambda w: study_protocol_json(w.dataset),
        out_dir=lambda w, output: os.path.dirname(output.manifest),
    log:
        "results/logs/freeze/{profile}/{dataset}.log",
    group: cluster_group("freeze_dataset")
    resources:
        **cluster_resources("freeze_dataset"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench freeze --per-query {input.per_query} --prepared {input.prepared} --protocol {params.protocol:q} "
        "--profile {wildcards.profile} --dataset {wildcards.dataset} --out {params.out_dir} > {log} 2>&1"


rule check_frozen:
    input:
        prepared=lambda w: prepared_folds(w.dataset),
    output:
        "results/compare/{dataset}/frozen.ok",
    params:
        frozen=lambda w: f"results/frozen/{PROFILE}/{w.dataset}",
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


rule compare_table:
    input:
        new=lambda w: evaluated_files(plan.COMPARE_EXPERIMENT, [w.dataset]),
        prepared=lambda w: prepared_folds(w.dataset),
        checked="results/compare/{dataset}/frozen.ok",
    output:
        md=report("reports/compare/{dataset}.md", caption="report/compare.rst", category="Compare"),
        html="reports/compare/{dataset}.html",
        stats="results/stats/compare/{dataset}.parquet",
    params:
        frozen=lambda w: f"results/frozen/{PROFILE}/{w.dataset}",
        spec=compare_spec_json,
    log:
        "results/logs/compare/{dataset}/table.log",
    group: cluster_group("compare_table")
    resources:
        **cluster_resources("compare_table"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench compare-table --frozen {params.frozen} --new {input.new} --prepared {input.prepared} "
        "--spec {params.spec:q} --stats-out {output.stats} --md {output.md} --html {output.html} 2>&1 | tee {log}"


rule freeze:
    input:
        lambda w: freeze_outputs(),


rule compare:
    input:
        lambda w: compare_outputs(),
