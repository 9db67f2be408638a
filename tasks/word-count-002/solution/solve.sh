#!/bin/bash
wc -w < /app/docs/smooth_clover.txt > /app/answer.txt
