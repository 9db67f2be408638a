#!/bin/bash
wc -l < /app/docs/lucky_spruce.txt > /app/answer.txt
