# Least-squares linear regression (methods with `linear: least_squares`): same run directory
# layout and provenance as train and gbdt; NumPy on the CPU, a few seconds at most.


rule linear:
    input:
        prepared=PREPARED,
        config=RUN_CONFIG,
    output:
        scores=f"{RUN}/scores.npy",
        run_json=f"{RUN}/run.json",
        curve=f"{RUN}/curve.csv",
        metrics=f"{RUN}/metrics.parquet",
    params:
        run_dir=lambda w, output: os.path.dirname(output.scores),
        device=config["device"],
        compute_threads=config["threads"],  # study config, not `{threads}` (see train.smk)
    wildcard_constraints:
        method=LINEAR_METHODS,
    log:
        "results/logs/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.log",
    benchmark:
        "results/benchmarks/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.tsv"
    threads: config["threads"]
    group: cluster_group("linear")
    resources:
        **cluster_resources("linear"),
    conda:
        "../environment.yml"
    shell:
        "OMP_NUM_THREADS={params.compute_threads} ltr-bench linear --prepared {input.prepared} --out {params.run_dir} "
        "--method {wildcards.method} --seed {wildcards.seed} --config {input.config} --device {params.device} "
        "--threads {params.compute_threads} --quiet > {log} 2>&1"
