"""Lesson 05's scheduler exercise: gl.check.schedule_jobs passes a correct plan written another
way and fails each typical mistake with its own hint."""

from greenlab.course import checks


def mine(values, jobs, deadline_first=True):
    """Earliest deadline first, written with a list of free flags instead of a set."""
    free = [True] * len(values)
    plan = {}
    for job in sorted(jobs, key=lambda j: j["deadline"]) if deadline_first else jobs:
        hours = [h for h in range(job["deadline"]) if free[h]]
        if job["interruptible"]:
            pick = sorted(hours, key=lambda h: (values[h], h))[:job["hours"]]
        else:
            blocks = [range(s, s + job["hours"]) for s in range(job["deadline"] - job["hours"] + 1)
                      if all(free[h] for h in range(s, s + job["hours"]))]
            pick = list(min(blocks, key=lambda b: (sum(values[h] for h in b), b[0]))) if blocks else []
        if len(pick) == job["hours"]:
            for h in pick:
                free[h] = False
            plan[job["name"]] = sorted(pick)
        else:
            plan[job["name"]] = None
    return {j["name"]: plan[j["name"]] for j in jobs}


def details(result):
    return " ".join(result.details)


def test_a_correct_plan_written_differently_passes():
    result = checks.schedule_jobs(mine)
    assert result.passed, result.text()


def test_ignoring_deadlines_fails_with_its_hint():
    def wrong(values, jobs):
        return mine(values, [{**j, "deadline": len(values)} for j in jobs])

    result = checks.schedule_jobs(wrong)
    assert result.status == checks.FAILED and "before its deadline" in details(result)


def test_planning_each_job_alone_fails_with_its_hint():
    def wrong(values, jobs):
        return {j["name"]: mine(values, [j])[j["name"]] for j in jobs}

    result = checks.schedule_jobs(wrong)
    assert result.status == checks.FAILED and "one machine" in details(result)


def test_never_interrupting_fails_with_its_hint():
    def wrong(values, jobs):
        return mine(values, [{**j, "interruptible": False} for j in jobs])

    result = checks.schedule_jobs(wrong)
    assert result.status == checks.FAILED and "interruptible job may take any free hours" in details(result)


def test_ignoring_deadline_order_fails_with_its_hint():
    def wrong(values, jobs):
        return mine(values, jobs, deadline_first=False)

    result = checks.schedule_jobs(wrong)
    assert result.status == checks.FAILED and "earliest deadline first" in details(result)


def test_stub_is_not_attempted():
    assert checks.schedule_jobs(None).status == checks.NOT_ATTEMPTED
    assert checks.schedule_jobs(lambda values, jobs: None).status == checks.NOT_ATTEMPTED
