# Paired significance tests: one statistics table per paper table.


rule stats:
    input:
        lambda w: evaluated_files(w.table, plan.table_datasets(config, w.table)),
    output:
        STATS,
    params:
        metrics=lambda w: " ".join(config["tables"][w.table]["metrics"]),
        args=lambda w: stats_params(w.table),
    log:
        "results/logs/stats/{table}.log",
    group: cluster_group("stats")
    resources:
        **cluster_resources("stats"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench stats --inputs {input} --metrics {params.metrics} {params.args} --out {output} > {log} 2>&1"
