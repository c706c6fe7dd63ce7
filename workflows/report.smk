# The HTML report: every table and figure with its caption (`snakemake --report`).
# The rule runs the report generation on the finished tables and figures, so `all` ends with
# reports/report.html; `snakemake --report reports/report.html` by hand gives the same file but
# for the section readable without JavaScript (`ltr-bench report-text ... --embed` adds it).


localrules:
    report,
    coverage,


# docs/coverage.md (every table and figure of the four papers: its target, or why not) as a
# page of the report, each target marked by whether this profile builds it
rule coverage:
    input:
        "docs/coverage.md",
    output:
        report(plan.profiled(config, plan.COVERAGE), caption="report/coverage.rst", category="Coverage"),
    params:
        args=" ".join(plan.coverage_args(config)),
    log:
        "results/logs/coverage.log",
    conda:
        "../environment.yml"
    shell:
        "ltr-bench coverage --doc {input} {params.args} --html {output} > {log} 2>&1"



rule report:
    input:
        outputs=report_inputs(),
    output:
        plan.report_file(config),
    params:
        # the config of *this* invocation, written when the job runs (never a stale copy)
        config_text=json.dumps(config, indent=2, sort_keys=True) + "\n",
        config_path="results/config/report-config.json",
        captions=plan.REPORT_CAPTIONS,
    log:
        "results/logs/report.log",
    conda:
        "../environment.yml"
    # a shell job (a `run:` job would start one more Snakemake process just to call this one)
    # its words three times over (bench/report/text.py): each table's and figure's title and full
    # caption as fragments the .rst captions include, the report, then all of them as text
    # readable without JavaScript
    shell:
        "mkdir -p $(dirname {params.config_path}) && "
        "printf '%s' {params.config_text:q} > {params.config_path}.tmp && mv {params.config_path}.tmp {params.config_path} && "
        "ltr-bench report-text {input.outputs} --captions {params.captions} > {log} 2>&1 && "
        "snakemake --nolock --configfile {params.config_path} --report {output} {input.outputs} >> {log} 2>&1 && "
        "ltr-bench report-text {input.outputs} --embed {output} >> {log} 2>&1"
