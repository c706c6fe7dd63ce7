# Data: fetch (download or verify a hand-placed archive) and prepare one fold.


localrules:
    fetch,


rule fetch:
    output:
        touch("results/fetched/{source}.done"),
    params:
        raw_dir=config["raw_dir"],
    log:
        "results/logs/fetch/{source}.log",
    retries: 2
    conda:
        "../environment.yml"
    shell:
        # tee: a manual dataset's "put the archive here" message must reach the terminal
        "ltr-bench fetch {wildcards.source} --raw-dir {params.raw_dir} 2>&1 | tee {log}"


rule prepare:
    input:
        fetched_input,
    output:
        directory(PREPARED),
    params:
        source=lambda w: dataset_spec(w)["source"],
        options=prepare_options,
        raw_dir=config["raw_dir"],
    log:
        "results/logs/prepare/{dataset}/{fold}.log",
    group: cluster_group("prepare")
    resources:
        **cluster_resources("prepare"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench prepare {params.source} --fold {wildcards.fold} --out {output} "
        "--options {params.options:q} --raw-dir {params.raw_dir} > {log} 2>&1"
