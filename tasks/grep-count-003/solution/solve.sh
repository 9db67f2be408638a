#!/bin/bash
grep -c 'WARN' /app/logs/swan.log > /app/pepper_count.txt
