#!/bin/bash
grep -c 'WARN' /app/logs/melon.log > /app/cabin_count.txt
