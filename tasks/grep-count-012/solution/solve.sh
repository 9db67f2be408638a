#!/bin/bash
grep -c 'nectar' /app/logs/eagle.log > /app/marble_count.txt
