#!/bin/bash
grep -c 'WARN' /app/logs/cactus.log > /app/count.txt
