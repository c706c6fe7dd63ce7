# Runs: one job per (experiment, dataset, fold, method, seed); runs shared by several tables of
# the same experiment protocol are trained once. A tuned method's runs are its tuning's two jobs'
# (workflows/tune.smk). One rule, `run`, for every run kind
# (bench.config.kinds.RUN_KINDS), used once per kind's rule: `train` (neural methods, SinkProp's
# own protocol), `gbdt` (LightGBM, XGBoost), `linear` (least squares). The rule names are what
# the cost models, the cluster sizes and bench.config.jobs know; each runs `ltr-bench <rule>`.
#
# A run job's output is its run.json alone (bench.config.plan.RUN_RECORD): the run directory
# appears in one rename, and Snakemake's cost per job grows with each file, input function and
# param function it holds, once per run job (docs/paper-scale.md).


# the template: it matches no method itself; each `use rule run as <rule>` below runs the
# methods of its kinds (same outputs, log, benchmark and shell for every run kind)
rule run:
    input:
        prepared=PREPARED,
        upstream=run_upstream,
    output:
        run_json=plan.run_record(RUN),
    params:
        run_dir=RUN,  # a string: Snakemake fills in the wildcards (no function to call per job)
        device=config["device"],
        # compute threads come from the study config (recorded in run.json as torch_threads),
        # never from `{threads}`: Snakemake caps that at --cores and a profile's set-threads
        # changes it, and CPU results depend on torch's thread count
        compute_threads=config["threads"],
        kernels=kernel_env,
        # `--config-json TEXT`: the method's run config, kept with the job's params (a changed config
        # reruns that method's runs)
        run_config=run_config_option,
        # params.command, `ltr-bench <rule>`: set by each run kind's rule below (a string per rule,
        # not a function per job)
    wildcard_constraints:
        method="(?!)",
    log:
        "results/logs/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.log",
    benchmark:
        "results/benchmarks/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}.tsv"
    threads: config["threads"]
    conda:
        "../environment.yml"
    shell:
        # the repository root on PYTHONPATH: user losses are `package.module:function`
        'export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}" OMP_NUM_THREADS={params.compute_threads} {params.kernels}; '
        "ltr-bench {params.command} --prepared {input.prepared} --out {params.run_dir} --method {wildcards.method} "
        "--seed {wildcards.seed} {params.run_config} --device {params.device} --threads {params.compute_threads} --quiet > {log} 2>&1"


use rule run as train with:
    wildcard_constraints:
        method=RULE_METHODS["train"],
    params:
        command="train",
    group: cluster_group("train")
    resources:
        **cluster_resources("train"),
        gpu=GPU,


use rule run as gbdt with:
    wildcard_constraints:
        method=RULE_METHODS["gbdt"],
    params:
        command="gbdt",
    group: cluster_group("gbdt")
    resources:
        **cluster_resources("gbdt"),


use rule run as linear with:
    wildcard_constraints:
        method=RULE_METHODS["linear"],
    params:
        command="linear",
    group: cluster_group("linear")
    resources:
        **cluster_resources("linear"),
