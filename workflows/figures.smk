# Figures: PNG + PDF each. One named rule per figure, e.g. `snakemake --cores 8 scaling_figure`.


rule figure:
    input:
        figure_inputs,
    output:
        png=report(f"{REPORTS}/figures/{{figure}}.png", caption="report/figures.rst", category="Figures"),
        pdf=f"{REPORTS}/figures/{{figure}}.pdf",
    params:
        spec=figure_spec_json,
        inputs=figure_input_args,
    log:
        "results/logs/figures/{figure}.log",
    group: cluster_group("figure")
    resources:
        **cluster_resources("figure"),
    conda:
        "../environment.yml"
    shell:
        "MPLBACKEND=Agg ltr-bench figure {wildcards.figure} --spec {params.spec:q} {params.inputs} "
        "--png {output.png} --pdf {output.pdf} > {log} 2>&1"


rule scaling_figure:
    input:
        lambda w: figure_outputs("scaling_figure"),


rule temperature_figure:
    input:
        lambda w: figure_outputs("temperature_figure"),


rule listsize_figure:
    input:
        lambda w: figure_outputs("listsize_figure"),


rule recall_heatmap:
    input:
        lambda w: figure_outputs("recall_heatmap"),


rule neuralndcg_curves:
    input:
        lambda w: figure_outputs("neuralndcg_curves"),


rule annealing_figure:
    input:
        lambda w: figure_outputs("annealing_figure"),


rule letor_curves:
    input:
        lambda w: figure_outputs("letor_curves"),


rule loss_curves:
    output:
        LOSS_CURVES,
    params:
        args=loss_curves_args(),
    log:
        "results/logs/figures/loss_curves.log",
    group: cluster_group("loss_curves")
    resources:
        **cluster_resources("loss_curves"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench loss-curves {params.args} --out {output} > {log} 2>&1"


rule quality_cost_figure:
    input:
        lambda w: figure_outputs("quality_cost_figure"),


rule cd_diagram:
    input:
        lambda w: figure_outputs("cd_diagram"),


# the quality-cost figure's table: a statistics table's means and seed intervals beside the
# seconds per epoch and peak memory of its own runs (run.json); nothing is trained
rule quality_cost:
    input:
        stats=lambda w: _planned(plan.quality_cost_inputs)()[0],
        runs=lambda w: _planned(plan.quality_cost_inputs)()[1:],
    output:
        plan.profiled(config, plan.QUALITY_COST),
    params:
        spec=lambda w: _sorted_json(_planned(plan.quality_cost_spec)()),
    log:
        "results/logs/figures/quality_cost.log",
    group: cluster_group("quality_cost")
    resources:
        **cluster_resources("quality_cost"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench quality-cost --stats {input.stats} --spec {params.spec:q} --out {output} > {log} 2>&1"
