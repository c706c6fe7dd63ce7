# The HTML report: every table and figure with its caption (`snakemake --report`).
# The rule runs the report generation on the finished tables and figures, so `all` ends with
# reports/report.html; `snakemake --report reports/report.html` by hand gives the same file.


localrules:
    report,


rule report:
    input:
        outputs=report_inputs(),
    output:
        "reports/report.html",
    params:
        # the config of *this* invocation, written when the job runs (never a stale copy)
        config_text=json.dumps(config, indent=2, sort_keys=True) + "\n",
        config_path="results/config/report-config.json",
    log:
        "results/logs/report.log",
    conda:
        "../environment.yml"
    run:
        write_text(params.config_path, params.config_text)
        shell(
            "snakemake --nolock --configfile {params.config_path} --report {output} {input.outputs} > {log} 2>&1"
        )
