# Equal-budget tuning on validation (bench.config.tuning, bench.selection.tuning): every method of a tuned
# protocol trains `tuning.budget` configurations on the tuning fold (rule train/gbdt, one job
# each); `tune` keeps the one with the best validation mean over the tuning seeds (run.json only,
# never the test split); `tuned_config` writes the chosen configuration's run config for the
# folds and seeds the tuning did not train (`<method>+tuned`); `tuning_summary` states, per
# tuned table, each method's budget, choice, compute and what tuning bought on test.


rule tune:
    input:
        lambda w: tune_inputs(w.experiment, w.dataset, w.method),
    output:
        plan.TUNING,
    params:
        spec=lambda w: _sorted_json(_planned(plan.tune_spec)(w.experiment, w.dataset, w.method)),
    log:
        "results/logs/tuning/{experiment}/{dataset}/{method}.log",
    wildcard_constraints:
        method=TUNED_METHODS,
    group: cluster_group("tune")
    resources:
        **cluster_resources("tune"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench tune --spec {params.spec:q} --out {output} > {log} 2>&1"


rule tuned_config:
    input:
        lambda w: _planned(plan.tuned_config_spec)(w.experiment, w.dataset, w.method)["record"],
    output:
        RUN_CONFIG,
    params:
        spec=lambda w: _sorted_json(_planned(plan.tuned_config_spec)(w.experiment, w.dataset, w.method)),
    log:
        "results/logs/configs/{experiment}/{dataset}/{method}.log",
    wildcard_constraints:
        method=r".+\+tuned",
    group: cluster_group("tuned_config")
    resources:
        **cluster_resources("tuned_config"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench tuned-config --spec {params.spec:q} --out {output} > {log} 2>&1"


rule tuning_summary:
    input:
        lambda w: _planned(plan.tuning_summary_inputs)(w.table),
    output:
        plan.profiled(config, plan.TUNING_SUMMARY),
    params:
        spec=lambda w: _sorted_json(_planned(plan.tuning_summary_spec)(w.table)),
        n_boot=config["stats"]["n_boot"],
        seed=config["stats"]["seed"],
    log:
        "results/logs/tuning/{table}.log",
    wildcard_constraints:
        table=STATS_TABLES,
    group: cluster_group("tuning_summary")
    resources:
        **cluster_resources("tuning_summary"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench tuning-summary --spec {params.spec:q} --n-boot {params.n_boot} --seed {params.seed} "
        "--out {output} > {log} 2>&1"
