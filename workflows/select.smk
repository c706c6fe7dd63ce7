# Hyperparameter selection on validation (bench.config.selection, bench.selection): per table,
# dataset and fold, the grid point of each selected method with the best validation mean over
# seeds, read from its runs' run.json (never the test split); the table's evaluation keeps the
# chosen point's runs, and the selection table shows every point.


rule select:
    input:
        lambda w: select_inputs(w.table, w.dataset, w.fold),
    output:
        SELECTION,
    params:
        spec=lambda w: _sorted_json(_planned(plan.select_spec)(w.table, w.dataset, w.fold)),
    log:
        "results/logs/selection/{table}/{dataset}/{fold}.log",
    wildcard_constraints:
        table=STATS_TABLES,
    group: cluster_group("select")
    resources:
        **cluster_resources("select"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench select --spec {params.spec:q} --out {output} > {log} 2>&1"


rule selection_table:
    input:
        lambda w: table_records(w.table),
    output:
        md=report(f"{REPORTS}/tables/{{table}}_selection.md", caption="report/selection.rst", category="Tables",
                  labels={"table": "{table}_selection", "format": "Markdown"}),
        tex=f"{REPORTS}/tables/{{table}}_selection.tex",
        html=report(f"{REPORTS}/tables/{{table}}_selection.html", caption="report/selection.rst", category="Tables",
                    labels={"table": "{table}_selection", "format": "HTML"}),
    params:
        spec=lambda w: _sorted_json(_planned(plan.selection_table_spec)(w.table)),
    wildcard_constraints:
        table=STATS_TABLES,
    log:
        "results/logs/tables/{table}_selection.log",
    group: cluster_group("selection_table")
    resources:
        **cluster_resources("selection_table"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench selection-table {wildcards.table} --selection {input} --spec {params.spec:q} "
        "--md {output.md} --tex {output.tex} --html {output.html} > {log} 2>&1"
