

def test_sweep_enumerates_expert_parallelism():
    """fred sweep: every EP that divides both the DP replicas and the experts, for MoE workloads
    only (dense workloads keep their MP x DP x PP strategies)."""
    from fred.commands.sweep import sweep_strategies

    moe = [s for s, _ in sweep_strategies(load_workload("mixtral-8x7b"), 20) if isinstance(s, str)]
    assert "MP(1)-EP(4)-DP(5)-PP(1)" in moe and "MP(2)-EP(2)-DP(5)-PP(1)" in moe
    assert all(expert_parallel(s) in (2, 4, 8) for s in moe)                   # divisors of 8 experts
    for s in moe:
        a, b, c = parse_strategy(s, 20)
        assert b % expert_parallel(s) == 0
    dense = sweep_strategies(load_workload("gpt3-175b"), 20)
    assert all(not isinstance(s, str) for s, _ in dense)
