#!/bin/bash
mkdir -p /app/orbit && tar xzf /app/clever-needle.tar.gz -C /app/orbit
grep '^api_key=' /app/orbit/saffron/olive/happy_bucket.ini | cut -d= -f2 > /app/nectar_value.txt
