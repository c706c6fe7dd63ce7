"""ltr-bench plan-check (bench/costs/scale.py): the job server's log read back, CPU seconds included."""

from __future__ import annotations

from bench.costs.scale import job_server_records


def test_job_server_lines_give_each_outputs_wall_peak_and_cpu(tmp_path):
    log = tmp_path / "job-server.log"
    log.write_text(
        "job server: pid 11: ltr-bench prepare synthetic --fold Fold1 --out results/prepared/x/Fold1 --options {}\n"
        "job server: pid 12: ltr-bench gbdt --prepared p --out results/runs/a/x/Fold1/m/seed0 --method m\n"
        "job server: pid 11: exit 0, 64.4 s, peak 2742 MB, cpu 31.9 s\n"
        "job server: pid 12: exit 0, 348.1 s, peak 3131 MB\n"  # a log written before CPU seconds were logged
        "job server: pid 13: ltr-bench evaluate --out results/evaluated/t/x/Fold1.parquet\n"
        "job server: pid 13: exit 1, 0.5 s, peak 300 MB, cpu 0.4 s\n")  # failed: not a measurement
    records = job_server_records([log])
    assert records == {"results/prepared/x/Fold1": {"seconds": 64.4, "peak_mb": 2742.0, "cpu_s": 31.9},
                       "results/runs/a/x/Fold1/m/seed0": {"seconds": 348.1, "peak_mb": 3131.0, "cpu_s": None}}
