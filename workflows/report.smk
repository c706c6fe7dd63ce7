# The HTML report: every table and figure with its caption (`snakemake --report`).
# The rule runs the report generation on the finished tables and figures, so `all` ends with
# reports/report.html; `snakemake --report reports/report.html` by hand gives the same file.


localrules:
    resolved_config,
    report,


rule resolved_config:
    output:
        "results/config/resolved.json",
    params:
        text=json.dumps(config, indent=2, sort_keys=True) + "\n",
    log:
        "results/logs/config/resolved.log",
    run:
        write_text(output[0], params.text)


rule report:
    input:
        config="results/config/resolved.json",
        outputs=report_inputs(),
    output:
        "reports/report.html",
    log:
        "results/logs/report.log",
    conda:
        "../environment.yml"
    shell:
        "snakemake --nolock --configfile {input.config} --report {output} {input.outputs} > {log} 2>&1"
