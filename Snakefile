# ltr-bench: the whole study as one DAG. Rules live in workflows/, one file per stage.
configfile: "config/default.yaml"


rule all:
    input:
        [],
    default_target: True
