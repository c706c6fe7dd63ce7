# Timing harness for the scaling figure (PiRank Fig. 7): `ltr-bench perf scaling` writes a CSV
# with columns loss, variant, L, seconds, peak_mb.


rule perf_scaling:
    output:
        csv=plan.profiled(config, plan.SCALING_CSV),
        md=plan.profiled(config, plan.SCALING_CSV).removesuffix(".csv") + ".md",
    params:
        args=perf_args(),
        device=config["device"],
        compute_threads=config["threads"],  # study config, not `{threads}` (see train.smk)
    log:
        "results/logs/perf/scaling.log",
    benchmark:
        "results/benchmarks/perf/scaling.tsv"
    threads: config["threads"]
    group: cluster_group("perf_scaling")
    resources:
        **cluster_resources("perf_scaling"),
        gpu=GPU,
    conda:
        "../environment.yml"
    shell:
        "OMP_NUM_THREADS={params.compute_threads} ltr-bench perf scaling {params.args} --device {params.device} "
        "--csv {output.csv} --out {output.md} > {log} 2>&1"
