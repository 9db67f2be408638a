#!/bin/bash
grep -c 'WARN' /app/logs/jasper.log > /app/count.txt
