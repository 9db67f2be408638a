#!/bin/bash
wc -c < /app/docs/clever_summit.txt > /app/answer.txt
