# Paper tables: statistics table -> Markdown, LaTeX (booktabs) and HTML. One named rule and
# one output path per table, e.g. `snakemake --cores 8 pirank_table1` or
# `snakemake --cores 8 reports/tables/pirank_table1.md`; each builds only what it needs.


rule table:
    input:
        stats=STATS,
        paper="bench/report/paper_numbers.yaml",
    output:
        md=report("reports/tables/{table}.md", caption="report/tables.rst", category="Tables",
                  labels={"table": "{table}", "format": "Markdown"}),
        tex="reports/tables/{table}.tex",
        html=report("reports/tables/{table}.html", caption="report/tables.rst", category="Tables",
                    labels={"table": "{table}", "format": "HTML"}),
    params:
        spec=table_spec_json,
    log:
        "results/logs/tables/{table}.log",
    group: cluster_group("table")
    resources:
        **cluster_resources("table"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench table {wildcards.table} --stats {input.stats} --paper-numbers {input.paper} "
        "--spec {params.spec:q} --md {output.md} --tex {output.tex} --html {output.html} > {log} 2>&1"


rule pirank_table1:
    input:
        lambda w: table_outputs("pirank_table1"),


rule neuralndcg_table3:
    input:
        lambda w: table_outputs("neuralndcg_table3"),


rule arf_table2:
    input:
        lambda w: table_outputs("arf_table2"),


rule listsize_table3:
    input:
        lambda w: table_outputs("listsize_table3"),


rule sinkprop_letor:
    input:
        lambda w: table_outputs("sinkprop_letor"),


rule unified_table:
    input:
        lambda w: table_outputs("unified_table"),
