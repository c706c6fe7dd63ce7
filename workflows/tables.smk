# Paper tables: statistics table -> Markdown, LaTeX (booktabs) and HTML. One named rule and
# one output path per table, e.g. `snakemake --cores 8 pirank_table1` or
# `snakemake --cores 8 reports/tables/pirank_table1.md`; each builds only what it needs.


rule table:
    input:
        stats=STATS,
        paper="bench/report/paper_numbers.yaml",
        selection=lambda w: selection_files(w.table),
        # a tuned table's budgets, choices and what tuning bought (rule tuning_summary)
        tuning=lambda w: [plan.profiled(config, plan.TUNING_SUMMARY).format(table=w.table)] if w.table in tuned_tables() else [],
    output:
        md=report(f"{REPORTS}/tables/{{table}}.md", caption="report/tables.rst", category="Tables",
                  labels=table_labels("Markdown")),
        tex=f"{REPORTS}/tables/{{table}}.tex",
        html=report(f"{REPORTS}/tables/{{table}}.html", caption="report/tables.rst", category="Tables",
                    labels=table_labels("HTML")),
    params:
        spec=table_spec_json,
        # the caption names the points chosen on validation (rule select)
        selection=lambda w, input: f"--selection {' '.join(input.selection)}" if input.selection else "",
        tuning=lambda w, input: f"--tuning {input.tuning}" if input.tuning else "",
    wildcard_constraints:
        table=STATS_TABLES,
    log:
        "results/logs/tables/{table}.log",
    group: cluster_group("table")
    resources:
        **cluster_resources("table"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench table {wildcards.table} --stats {input.stats} --paper-numbers {input.paper} "
        "{params.selection} {params.tuning} --spec {params.spec:q} --md {output.md} --tex {output.tex} --html {output.html} "
        "> {log} 2>&1"


rule pirank_table1:
    input:
        lambda w: table_targets("pirank_table1"),


rule neuralndcg_table3:
    input:
        lambda w: table_targets("neuralndcg_table3"),


rule arf_table2:
    input:
        lambda w: table_targets("arf_table2"),


rule listsize_table3:
    input:
        lambda w: table_targets("listsize_table3"),


rule sinkprop_letor:
    input:
        lambda w: table_targets("sinkprop_letor"),


rule unified_table:
    input:
        lambda w: table_targets("unified_table"),


rule arf_table6:
    input:
        lambda w: table_targets("arf_table6"),


rule arf_table7:
    input:
        lambda w: table_targets("arf_table7"),


rule arf_table8:
    input:
        lambda w: table_targets("arf_table8"),


# Tables computed from something other than paired statistics (`computed_tables:` in the
# config): NeuralSort's toy sort, the datasets' statistics, the runs' time and memory records,
# a table's ranking across datasets and folds.
rule computed_table:
    input:
        files=computed_table_inputs,
        paper="bench/report/paper_numbers.yaml",
    output:
        md=report(f"{REPORTS}/tables/{{table}}.md", caption="report/computed_tables.rst", category="Tables",
                  labels=table_labels("Markdown")),
        tex=f"{REPORTS}/tables/{{table}}.tex",
        html=report(f"{REPORTS}/tables/{{table}}.html", caption="report/computed_tables.rst", category="Tables",
                    labels=table_labels("HTML")),
    params:
        spec=computed_table_spec_json,
    wildcard_constraints:
        table=COMPUTED_TABLES,
    log:
        "results/logs/tables/{table}.log",
    group: cluster_group("computed_table")
    resources:
        **cluster_resources("computed_table"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench computed-table {wildcards.table} --input {input.files} --paper-numbers {input.paper} "
        "--spec {params.spec:q} --md {output.md} --tex {output.tex} --html {output.html} > {log} 2>&1"


rule neuralndcg_table1:
    input:
        lambda w: computed_table_outputs("neuralndcg_table1"),


rule neuralndcg_table2:
    input:
        lambda w: computed_table_outputs("neuralndcg_table2"),


rule arf_table9:
    input:
        lambda w: computed_table_outputs("arf_table9"),


rule ranking_table:
    input:
        lambda w: computed_table_outputs("ranking_table"),


# issue 40: one ranking of a statistics table's methods across its datasets and folds (mean ranks,
# Friedman, Nemenyi, critical difference: bench/ranking.py), from its evaluated frames; the
# computed table ranking_table renders it, the figure cd_diagram draws it
rule ranking:
    input:
        lambda w: _planned(plan.ranking_inputs)(),
    output:
        plan.profiled(config, plan.RANKING),
    params:
        spec=lambda w: _sorted_json(_planned(plan.ranking_spec)()),
    log:
        "results/logs/tables/ranking.log",
    group: cluster_group("ranking")
    resources:
        **cluster_resources("ranking"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench ranking --inputs {input} --spec {params.spec:q} --out {output} > {log} 2>&1"


rule toy_sort:
    output:
        plan.profiled(config, plan.TOY_SORT),
    params:
        taus=lambda w: " ".join(map(str, config["computed_tables"]["neuralndcg_table1"]["taus"])),
    log:
        "results/logs/tables/toy_sort.log",
    group: cluster_group("toy_sort")
    resources:
        **cluster_resources("toy_sort"),
    conda:
        "../environment.yml"
    shell:
        "ltr-bench toy-sort --taus {params.taus} --out {output} > {log} 2>&1"
