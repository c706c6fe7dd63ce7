# Neural training: one job per (experiment, dataset, fold, method, seed); runs shared by
# several tables of the same experiment protocol are trained once.


localrules:
    run_config,


rule run_config:
    output:
        RUN_CONFIG,
    params:
        text=run_config_json,
    log:
        "results/logs/configs/{experiment}/{dataset}/{method}.log",
    conda:
        "../environment.yml"
    # a shell job, not `run:`: Snakemake executes every `run:` job in a fresh Snakemake
    # process (about 3.5 s of start-up each, 64 jobs in the default study); printf + mv is
    # milliseconds and still atomic
    shell:
        "printf '%s' {params.text:q} > {output}.tmp 2> {log} && mv {output}.tmp {output}"


rule train:
    input:
        prepared=PREPARED,
        config=RUN_CONFIG,
        checked=lambda w: [f"results/compare/{w.dataset}/frozen.ok"] if w.experiment == "compare" else [],
    output:
        scores=f"{RUN}/scores.npy",
        run_json=f"{RUN}/run.json",
        curve=f"{RUN}/curve.csv",
        metrics=f"{RUN}/metrics.parquet",
    params:
        run_dir=lambda w, output: os.path.dirname(output.scores),
        device=config["device"],
        # compute threads come from the study config (recorded in run.json as torch_threads),
        # never from `{threads}`: Snakemake caps that at --cores and a profile's set-threads
        # changes it, and CPU results depend on torch's thread count
        compute_threads=config["threads"],
    wildcard_constraints:
        method=NEURAL_METHODS,
    log:
        "results/logs/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.log",
    benchmark:
        "results/benchmarks/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.tsv"
    threads: config["threads"]
    group: cluster_group("train")
    resources:
        **cluster_resources("train"),
        gpu=GPU,
    conda:
        "../environment.yml"
    shell:
        # the repository root on PYTHONPATH: user losses are `package.module:function`
        'export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}" OMP_NUM_THREADS={params.compute_threads}; '
        "ltr-bench train --prepared {input.prepared} --out {params.run_dir} --method {wildcards.method} "
        "--seed {wildcards.seed} --config {input.config} --device {params.device} --threads {params.compute_threads} --quiet > {log} 2>&1"
