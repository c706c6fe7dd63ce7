# Equal-budget tuning on validation (bench.config.tuning, bench.selection.tuning): every method of a
# tuned protocol trains `tuning.budget` configurations on the tuning fold; `tune` is one job per
# method and dataset that trains them one after another (each run written whole; started again
# after a kill, the job keeps the runs it had finished: bench.training.cli.train_runs) and keeps the one with the best validation mean over the tuning seeds
# (run.json only, never the test split); `tuned_runs`, one job per method and dataset too, writes
# the chosen configuration's run config and trains it (`<method>+tuned`) on every fold and seed
# the tuning did not that an evaluation reads; `tuning_summary` states, per tuned table, each
# method's budget, choice, compute and what tuning bought on test.
# Whatever reads those runs names the record of the job that trains them (bench.config.plan.run_input):
# they have no job of their own, which keeps the paper profile's DAG thousands of jobs smaller
# (docs/paper-scale.md).


rule tune:
    input:
        lambda w: tune_inputs(w.experiment, w.dataset, w.method),
    output:
        plan.TUNING,
    params:
        # every configuration's run config is in the spec: a changed one reruns the tuning
        spec=lambda w: _sorted_json(_planned(plan.tune_spec)(w.experiment, w.dataset, w.method)),
        device=config["device"],
        compute_threads=config["threads"],  # as a run's (rule run)
        kernels=kernel_env,
    log:
        "results/logs/tuning/{experiment}/{dataset}/{method}.log",
    wildcard_constraints:
        method=TUNED_METHODS,
    threads: config["threads"]
    group: cluster_group("tune")
    resources:
        **trainer_resources("tune"),
    conda:
        "../environment.yml"
    shell:
        'export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}" OMP_NUM_THREADS={params.compute_threads} {params.kernels}; '
        "ltr-bench tune --spec {params.spec:q} --device {params.device} --threads {params.compute_threads} --quiet "
        "--out {output} > {log} 2>&1"


rule tuned_runs:
    input:
        lambda w: _planned(plan.tuned_runs_inputs)(w.experiment, w.dataset, w.method),
    output:
        record=plan.TUNED_RUNS,
        config=RUN_CONFIG,
    params:
        spec=lambda w: _sorted_json(_planned(plan.tuned_runs_spec)(w.experiment, w.dataset, w.method)),
        device=config["device"],
        compute_threads=config["threads"],
        kernels=kernel_env,
    log:
        "results/logs/tuning/{experiment}/{dataset}/{method}.log",
    wildcard_constraints:
        method=r".+\+tuned",
    threads: config["threads"]
    group: cluster_group("tuned_runs")
    resources:
        **trainer_resources("tuned_runs"),
    conda:
        "../environment.yml"
    shell:
        'export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}" OMP_NUM_THREADS={params.compute_threads} {params.kernels}; '
        "ltr-bench tuned-runs --spec {params.spec:q} --device {params.device} --threads {params.compute_threads} "
        "--quiet --out {output.record} > {log} 2>&1"


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
