"""Tag documents and their translations `pii=true|false` from a Macie classification job's findings.

The bucket's lifecycle rules (template.yaml) expire objects by that tag, so a document with personal data and its
translations are kept exactly as long as the PII retention allows. Tagging is idempotent: a retried or repeated run
sets the same tags again and keeps every other tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shared.aws import client

PII_TAG = "pii"
GET_FINDINGS_MAX_IDS = 50


@dataclass(frozen=True)
class Tagged:
    documents: int
    translations: int
    with_pii: int

    def as_dict(self) -> dict[str, int]:
        return {"documents": self.documents, "translations": self.translations, "withPii": self.with_pii}


def keys_with_findings(bucket: str, classification_job_id: str) -> set[str]:
    """Object keys in `bucket` that the classification job reported sensitive data in."""
    macie = client("macie2")
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [classification_job_id]}}}
    ids = [
        finding_id
        for page in macie.get_paginator("list_findings").paginate(findingCriteria=criteria)
        for finding_id in page["findingIds"]
    ]
    keys: set[str] = set()
    for start in range(0, len(ids), GET_FINDINGS_MAX_IDS):
        for finding in macie.get_findings(findingIds=ids[start : start + GET_FINDINGS_MAX_IDS])["findings"]:
            resources = finding.get("resourcesAffected", {})
            if resources.get("s3Bucket", {}).get("name") == bucket and "key" in resources.get("s3Object", {}):
                keys.add(resources["s3Object"]["key"])
    return keys


def _keys(bucket: str, prefix: str) -> Iterator[str]:
    for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from (o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/"))


def translations(bucket: str, output_prefix: str, translation_job_id: str) -> dict[str, list[str]]:
    """Source key -> translated keys, from the job's auxiliary translation details files (one per language)."""
    s3 = client("s3")
    marker = f"-TranslateText-{translation_job_id}/details/"
    result: dict[str, list[str]] = {}
    for key in _keys(bucket, output_prefix):
        if marker not in key or not key.endswith(".auxiliary-translation-details.json"):
            continue
        details: dict[str, Any] = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        input_prefix = details["inputDataPrefix"].removeprefix(f"s3://{bucket}/")
        output_dir = details["outputDataPrefix"].removeprefix(f"s3://{bucket}/")
        for entry in details.get("details", []):
            if "targetFile" in entry:
                source = f"{input_prefix.rstrip('/')}/{entry['sourceFile']}" if input_prefix else entry["sourceFile"]
                result.setdefault(source, []).append(f"{output_dir}{entry['targetFile']}")
    return result


def tag(bucket: str, key: str, pii: bool) -> None:
    """Set the pii tag, keeping the object's other tags."""
    s3 = client("s3")
    tags = [t for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"] if t["Key"] != PII_TAG]
    tags.append({"Key": PII_TAG, "Value": str(pii).lower()})
    s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": tags})


def tag_documents(
    bucket: str, input_prefix: str, output_prefix: str, translation_job_id: str, classification_job_id: str
) -> Tagged:
    """Tag every source document under `input_prefix` and each of its translations from Macie's findings."""
    with_pii = keys_with_findings(bucket, classification_job_id)
    translated = translations(bucket, output_prefix, translation_job_id)
    documents = translation_count = 0
    for source in _keys(bucket, input_prefix):
        pii = source in with_pii
        tag(bucket, source, pii)
        for target in translated.get(source, []):
            tag(bucket, target, pii)
            translation_count += 1
        documents += 1
    return Tagged(documents, translation_count, len(with_pii))
