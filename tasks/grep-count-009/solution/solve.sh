#!/bin/bash
grep -c 'WARN' /app/logs/jasper.log > /app/heron_count.txt
