"""``python s3cat.py s3://BUCKET/KEY``: the object's bytes on stdout, streamed through boto3
(endpoint and keys from the environment), for WebDataset's ``pipe:`` URLs from a bucket: what
``pipe:aws s3 cp s3://BUCKET/KEY -`` does, without installing the AWS CLI."""

import sys

import boto3


def main() -> int:
    url = sys.argv[1]
    if not url.startswith("s3://") or "/" not in url[5:]:
        print(f"s3cat: not an s3://BUCKET/KEY URL: {url}", file=sys.stderr)
        return 2
    bucket, key = url[5:].split("/", 1)
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
    out = sys.stdout.buffer
    for chunk in body.iter_chunks(1 << 20):
        out.write(chunk)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
