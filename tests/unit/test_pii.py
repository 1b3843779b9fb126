"""Tagging documents and their translations pii=true|false from a Macie classification job's findings (the bucket's
lifecycle rules expire objects by that tag), as the documents workflow's TagDocuments step invokes the function.

Documents and translations are on moto's S3, laid out as Amazon Translate writes a batch job's output (translated
files and auxiliary translation details per language); Macie's findings come through botocore Stubber.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.stub import Stubber
from pydantic import ValidationError

from tests.unit.payloads import macie_finding, translation_output
from tests.unit.support import Aws, invoke, tags_of

BUCKET = "callback-kit-unit-documents"
INPUT, OUTPUT = "incoming/2026-01-15/", "translated/2026-01-15/"
TRANSLATION_JOB, CLASSIFICATION_JOB = "8882c5390a2c0bd2d6ddba2f5b5faa9d", "85a55dc0fa6ed0be5939d0408f2e1c7b"
REQUEST = {
    "bucket": BUCKET,
    "inputPrefix": INPUT,
    "outputPrefix": OUTPUT,
    "translationJobId": TRANSLATION_JOB,
    "classificationJobId": CLASSIFICATION_JOB,
}
GET_FINDINGS_LIMIT = 50  # ids per GetFindings call (Macie API)


@pytest.fixture
def s3(s3_bucket: Callable[[str], Any]) -> Any:
    return s3_bucket(BUCKET)


def put_documents(s3: Any, names: list[str]) -> list[str]:
    keys = [INPUT + name for name in names]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=f"text of {key}".encode())
    return keys


def macie_reports(stubbed: Callable[[str], Stubber], findings: list[dict[str, Any]], page_size: int = 50) -> None:
    """Macie answering ListFindings (paginated) and GetFindings (at most 50 ids a call) for the job's findings."""
    macie = stubbed("macie2")
    criteria = {"criterion": {"classificationDetails.jobId": {"eq": [CLASSIFICATION_JOB]}}}
    ids = [finding["id"] for finding in findings]
    pages = [ids[start : start + page_size] for start in range(0, len(ids), page_size)] or [[]]
    for n, page in enumerate(pages):
        response: dict[str, Any] = {"findingIds": page}
        expected: dict[str, Any] = {"findingCriteria": criteria}
        if n + 1 < len(pages):
            response["nextToken"] = f"page-{n + 1}"
        if n:
            expected["nextToken"] = f"page-{n}"
        macie.add_response("list_findings", response, expected)
    for start in range(0, len(ids), GET_FINDINGS_LIMIT):
        chunk = ids[start : start + GET_FINDINGS_LIMIT]
        macie.add_response(
            "get_findings", {"findings": findings[start : start + GET_FINDINGS_LIMIT]}, {"findingIds": chunk}
        )


def tag(request: dict[str, Any] = REQUEST) -> dict[str, int]:
    return dict(invoke("tag_documents", request))


def test_documents_with_findings_and_their_translations_are_tagged_pii_true_the_others_false(
    aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]
) -> None:
    # Given four documents (one in a sub-folder), their French and German translations, and Macie's findings of
    # personal data in two of them
    documents = put_documents(s3, ["contract.txt", "letter.txt", "memo.txt", "hr/review.txt"])
    translated = translation_output(s3, BUCKET, INPUT, OUTPUT, TRANSLATION_JOB, ["fr", "de"])
    with_pii = {INPUT + "letter.txt", INPUT + "hr/review.txt"}
    macie_reports(stubbed, [macie_finding(BUCKET, key, CLASSIFICATION_JOB) for key in sorted(with_pii)])

    # When the documents are tagged
    result = tag()

    # Then each document and each of its translations says whether the document holds personal data
    assert result == {"documents": 4, "translations": 8, "withPii": 2}
    for source in documents:
        assert len(translated[source]) == 2
        for key in (source, *translated[source]):
            assert tags_of(s3, BUCKET, key) == {"pii": "true" if source in with_pii else "false"}, key
    stubbed("macie2").assert_no_pending_responses()


def test_other_tags_are_kept_and_a_stale_pii_tag_is_replaced(
    aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a document tagged by its owner and, wrongly, pii=false, with a translation tagged by someone else
    [document] = put_documents(s3, ["letter.txt"])
    [translation] = translation_output(s3, BUCKET, INPUT, OUTPUT, TRANSLATION_JOB, ["fr"])[document]
    s3.put_object_tagging(
        Bucket=BUCKET,
        Key=document,
        Tagging={"TagSet": [{"Key": "owner", "Value": "legal"}, {"Key": "pii", "Value": "false"}]},
    )
    s3.put_object_tagging(Bucket=BUCKET, Key=translation, Tagging={"TagSet": [{"Key": "reviewed", "Value": "no"}]})
    macie_reports(stubbed, [macie_finding(BUCKET, document, CLASSIFICATION_JOB)])

    # When the documents are tagged
    tag()

    # Then the pii tag is set, once, and the other tags are still there
    assert tags_of(s3, BUCKET, document) == {"owner": "legal", "pii": "true"}
    assert tags_of(s3, BUCKET, translation) == {"reviewed": "no", "pii": "true"}
    assert len(s3.get_object_tagging(Bucket=BUCKET, Key=document)["TagSet"]) == 2


def test_tagging_again_sets_the_same_tags(aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]) -> None:
    # Given documents tagged once (the step is retried, or the workflow run again)
    documents = put_documents(s3, ["contract.txt", "letter.txt"])
    translated = translation_output(s3, BUCKET, INPUT, OUTPUT, TRANSLATION_JOB, ["fr"])
    findings = [macie_finding(BUCKET, INPUT + "letter.txt", CLASSIFICATION_JOB)]
    macie_reports(stubbed, findings)
    first = tag()
    keys = [key for source in documents for key in (source, *translated[source])]
    tagged = {key: s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"] for key in keys}

    # When they are tagged a second time
    macie_reports(stubbed, findings)
    second = tag()

    # Then the result and every object's tags are the same
    assert second == first
    assert {key: s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"] for key in keys} == tagged


def test_a_finding_in_another_bucket_does_not_tag_a_document_with_the_same_key(
    aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a document, and a finding of the job for an object with the same key in another bucket
    [document] = put_documents(s3, ["letter.txt"])
    macie_reports(stubbed, [macie_finding("another-bucket", document, CLASSIFICATION_JOB)])

    # When the documents are tagged
    result = tag()

    # Then the document is not taken for one with personal data
    assert tags_of(s3, BUCKET, document) == {"pii": "false"}
    assert result["withPii"] == 0


def test_all_findings_are_read_however_many_there_are(aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]) -> None:
    # Given 60 documents, 55 of them with findings: more than one ListFindings page and one GetFindings call hold
    documents = put_documents(s3, [f"doc-{n:02d}.txt" for n in range(60)])
    with_pii = documents[:55]
    macie_reports(stubbed, [macie_finding(BUCKET, key, CLASSIFICATION_JOB) for key in with_pii], page_size=25)

    # When the documents are tagged
    result = tag()

    # Then every document with findings is tagged pii=true (the findings were read in pages and in calls of 50)
    assert result == {"documents": 60, "translations": 0, "withPii": 55}
    assert [tags_of(s3, BUCKET, key)["pii"] for key in documents] == ["true"] * 55 + ["false"] * 5
    stubbed("macie2").assert_no_pending_responses()


def test_a_document_translate_could_not_translate_is_tagged_without_translations(
    aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]
) -> None:
    # Given two documents, one of which Translate reported an error for (its job COMPLETED_WITH_ERROR)
    documents = put_documents(s3, ["good.txt", "broken.txt"])
    translated = translation_output(
        s3, BUCKET, INPUT, OUTPUT, TRANSLATION_JOB, ["fr"], failed=frozenset({INPUT + "broken.txt"})
    )
    macie_reports(stubbed, [])

    # When the documents are tagged
    result = tag()

    # Then both documents are tagged, and only the translation that exists
    assert result == {"documents": 2, "translations": 1, "withPii": 0}
    assert translated[INPUT + "broken.txt"] == []
    for key in (*documents, *translated[INPUT + "good.txt"]):
        assert tags_of(s3, BUCKET, key) == {"pii": "false"}


def test_other_jobs_outputs_and_folder_markers_are_left_alone(
    aws: Aws, s3: Any, stubbed: Callable[[str], Stubber]
) -> None:
    # Given a document, its translation, the translation of an earlier job under the same output prefix, and a
    # folder marker object for the input prefix (as the S3 console creates)
    [document] = put_documents(s3, ["letter.txt"])
    s3.put_object(Bucket=BUCKET, Key=INPUT, Body=b"")
    [earlier] = translation_output(s3, BUCKET, INPUT, OUTPUT, "0123456789abcdef0123456789abcdef", ["fr"])[document]
    [translation] = translation_output(s3, BUCKET, INPUT, OUTPUT, TRANSLATION_JOB, ["fr"])[document]
    macie_reports(stubbed, [macie_finding(BUCKET, document, CLASSIFICATION_JOB)])

    # When the documents are tagged for this job
    result = tag()

    # Then only this job's translation is tagged; the earlier job's output and the folder marker are untouched
    assert result == {"documents": 1, "translations": 1, "withPii": 1}
    assert tags_of(s3, BUCKET, translation) == {"pii": "true"}
    assert tags_of(s3, BUCKET, earlier) == {}
    assert tags_of(s3, BUCKET, INPUT) == {}


def test_a_request_without_the_classification_job_is_refused(aws: Aws, s3: Any) -> None:
    # Given a tagging request that lacks the classification job id
    [document] = put_documents(s3, ["letter.txt"])
    request = {k: v for k, v in REQUEST.items() if k != "classificationJobId"}

    # When it reaches the function
    with pytest.raises(ValidationError) as refused:
        tag(request)

    # Then it is refused naming the field, and nothing is tagged
    assert "classificationJobId" in str(refused.value)
    assert tags_of(s3, BUCKET, document) == {}
