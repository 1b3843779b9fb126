"""The Lambda runtime, offline: each function's `sam build` package in worker processes of its own (lambdas.py), the
bootstrap those workers run on the clean python3.13 + boto3 interpreter (lambda_bootstrap.py), the chaos run's faults
at their wire (lambda_faults.py), and the build that makes the packages (build.py)."""
