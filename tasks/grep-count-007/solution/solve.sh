#!/bin/bash
grep -c 'WARN' /app/logs/melon.log > /app/count.txt
