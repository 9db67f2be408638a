#!/bin/bash
mkdir -p /app/orbit && tar xzf /app/clever-needle.tar.gz -C /app/orbit
grep '^api_key=' /app/orbit/nectar/olive/happy_bucket.ini | cut -d= -f2 > /app/value.txt
