"""PlanService: an idea becomes questions, answers, and a validated PRD with tasks."""
