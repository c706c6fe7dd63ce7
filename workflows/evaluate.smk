# Per-query evaluation of a table's (or figure's, or the freeze/compare) runs on one fold.


rule evaluate:
    input:
        prepared=PREPARED,
        records=evaluated_records,
        selection=evaluation_records,
    output:
        EVALUATED,
    params:
        runs=lambda w: json.dumps(evaluated_runs(w)),
        args=lambda w: evaluate_params(w),
        # the chosen grid points (rule select) and tuned configurations (rule tune) of the methods chosen on validation
        selection=lambda w, input: f"--selection {' '.join(input.selection)}" if input.selection else "",
    log:
        "results/logs/evaluated/{name}/{dataset}/{fold}.log",
    group: cluster_group("evaluate")
    resources:
        **cluster_resources("evaluate"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench evaluate --prepared {input.prepared} --dataset {wildcards.dataset} --fold {wildcards.fold} "
        "--runs {params.runs:q} {params.args} {params.selection} --out {output} > {log} 2>&1"
